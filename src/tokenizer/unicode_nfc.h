// Unicode Normalization Form C (canonical decomposition, then canonical composition), for the
// NFC normalizer of Qwen-style tokenizer.json files. Data: unicode_nfc_tables.h.
#pragma once

#include <string>
#include <string_view>

namespace inflight::unicode {

// True when `text` certainly is in NFC already (no code point that NFC could touch): the
// common case, checked without allocating. False means "run nfc()", not "not NFC".
bool is_nfc_quick(std::string_view text);

// NFC of valid UTF-8 text.
std::string nfc(std::string_view text);

}  // namespace inflight::unicode
