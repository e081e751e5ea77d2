// TokenCodec: the little a benchmark needs from a tokenizer, behind an interface so that the
// dataset code is tested with small hand-made codecs and built before the real tokenizer.
// load_token_codec() wraps inflight::Tokenizer (src/tokenizer/).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inflight::bench {

class TokenCodec {
 public:
  virtual ~TokenCodec() = default;
  // text -> ids, adding no special tokens (the unit prompt and output lengths are counted in).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // ids -> text, leaving special tokens out.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int32_t vocab_size() const = 0;
  // Whether a random prompt may use this id: ordinary text, not a control or unused token.
  virtual bool is_ordinary(int32_t id) const = 0;
  virtual std::string description() const = 0;
};

// A GGUF file, tokenizer.json, .tiktoken file or directory (what Tokenizer::from_path takes).
// Throws Error(kUnsupported) when this build has no tokenizer library.
std::unique_ptr<TokenCodec> load_token_codec(const std::string& path);

}  // namespace inflight::bench
