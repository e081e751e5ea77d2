// UTF-8 helpers shared by the tokenizers and the streaming detokenizer.
//
// Repair rule (used everywhere text is made valid): each maximal subpart of an ill-formed
// sequence becomes one U+FFFD, the Unicode/WHATWG "substitution of maximal subparts" practice
// that Python's errors="replace" and Rust's from_utf8_lossy follow. The rule is streaming-safe:
// repairing a string in pieces, holding back an incomplete tail, gives the same result as
// repairing it whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace inflight::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid sequence starting at s[pos] (1..4), or 0 when ill-formed or truncated.
// On return *cp holds the code point (only when valid).
size_t decode(std::string_view s, size_t pos, char32_t* cp);

// Length of the code point sequence that a lead byte announces (1 for ASCII and stray bytes).
inline size_t sequence_length(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return lead < 0xF8 ? 4 : 1;
}

void append(std::string& out, char32_t cp);

bool is_valid(std::string_view s);

// Appends the repaired form of `in` to `out`. With final = false, a trailing sequence that is
// incomplete but could still become valid is not consumed. Returns the number of bytes of `in`
// consumed (all of them when final).
size_t repair(std::string_view in, std::string& out, bool final);

// `in` when it is valid (no copy into `storage`), else its repaired copy held in `storage`.
std::string_view sanitize(std::string_view in, std::string& storage);

}  // namespace inflight::utf8
