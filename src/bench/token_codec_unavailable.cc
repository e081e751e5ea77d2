// Built instead of token_codec.cc while the tokenizer library is absent from the build.
#include "bench/token_codec.h"

#include "core/check.h"

namespace inflight::bench {

std::unique_ptr<TokenCodec> load_token_codec(const std::string& path) {
  INFLIGHT_THROW(ErrorCode::kUnsupported,
                 "cannot load tokenizer '{}': this build has no tokenizer library", path);
}

}  // namespace inflight::bench
