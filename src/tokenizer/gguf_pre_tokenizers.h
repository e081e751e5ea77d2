// The pre-tokenizer that each GGUF `tokenizer.ggml.pre` name stands for: the regexes (applied in
// sequence, matches and gaps kept) and the flags llama.cpp attaches to the name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inflight {

struct GgufPreTokenizer {
  std::vector<std::string> regexes;
  bool ignore_merges = false;  // a word that is a token is not merged (Llama 3 family)
  bool add_bos = false;        // default for add_bos_token when the file does not say
};

// Nothing for a name we do not know.
std::optional<GgufPreTokenizer> gguf_pre_tokenizer(std::string_view pre);

}  // namespace inflight
