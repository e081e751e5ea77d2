// Builds the original GPT-2 tokenizer from encoder.json (byte-level spelling -> id) and
// vocab.bpe (a "#version" line, then one merge "a b" per line, in rank order).
#pragma once

#include <memory>
#include <string>

namespace inflight {

class TokenizerImpl;

// Throws Error(kNotFound / kInvalidFile) naming the file and the line or key.
std::unique_ptr<TokenizerImpl> load_gpt2_files(const std::string& encoder_json,
                                               const std::string& vocab_bpe);

}  // namespace inflight
