// Builds a tokenizer from the `tokenizer.ggml.*` metadata of a GGUF file, with llama.cpp's
// defaults and quirks (default special ids per model, add_bos per pre-tokenizer, end-of-turn
// tokens forced to control, Phi-3's rstrip on special tokens).
#pragma once

#include <memory>

namespace inflight {

class GgufFile;
class TokenizerImpl;

// Throws Error(kNotFound) for a missing required key, kUnsupported for a tokenizer model or
// pre-tokenizer we do not implement, kInvalidFile for inconsistent arrays; each names the key.
std::unique_ptr<TokenizerImpl> load_gguf_tokenizer(const GgufFile& gguf);

}  // namespace inflight
