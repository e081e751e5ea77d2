// Builds a tokenizer from a tiktoken rank file ("<base64 token> <rank>" per line). The
// pre-tokenizer regex and the special tokens are not in the file: they are chosen by its name
// (cl100k_base, o200k_base, p50k_base, r50k_base), as tiktoken itself does.
#pragma once

#include <memory>
#include <string>

namespace inflight {

class TokenizerImpl;

// Throws Error(kNotFound) for a missing file, kInvalidFile (with the line number) for a bad
// line, kUnsupported for an encoding name we do not know.
std::unique_ptr<TokenizerImpl> load_tiktoken(const std::string& path);

}  // namespace inflight
