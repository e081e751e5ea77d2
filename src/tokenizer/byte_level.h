// GPT-2's reversible byte <-> code point map ("bytes_to_unicode"): printable Latin-1 bytes map
// to themselves, the other 68 bytes to U+0100.. in order, so every byte string becomes a
// printable string (' ' -> 'Ġ', '\n' -> 'Ċ'). Byte-level BPE vocabularies are spelled in it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace inflight::byte_level {

// The code point that stands for `byte`.
char32_t byte_to_code_point(uint8_t byte);

// The byte a code point stands for, or nothing if it is not one of the 256.
std::optional<uint8_t> code_point_to_byte(char32_t cp);

// raw bytes -> their byte-level spelling (UTF-8).
std::string encode(std::string_view bytes);

// byte-level spelling -> raw bytes; nothing if some character is not one of the 256.
std::optional<std::string> decode(std::string_view text);

}  // namespace inflight::byte_level
