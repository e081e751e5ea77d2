// Builds a tokenizer from a Hugging Face tokenizer.json whose model is BPE.
//
// Supported: normalizers NFC, Prepend, Replace (string pattern), Sequence; pre-tokenizers
// Split (regex or string, every behaviour, invert), ByteLevel, Metaspace, Digits, Punctuation,
// Whitespace, WhitespaceSplit, Sequence; BPE with ignore_merges, byte_fallback, unk_token,
// fuse_unk; added tokens (special -> control, others always matched, lstrip/rstrip);
// TemplateProcessing / Roberta / Bert post-processors (what add_special adds); decoders
// ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip. Anything else is reported as
// unsupported rather than tokenized differently.
//
// BOS/EOS/pad/unk names come from tokenizer_config.json beside the file when present.
#pragma once

#include <memory>
#include <string>

namespace inflight {

class TokenizerImpl;

// Throws Error(kNotFound / kInvalidFile / kUnsupported) naming the file and the JSON path.
std::unique_ptr<TokenizerImpl> load_hf_tokenizer_json(const std::string& path);

}  // namespace inflight
