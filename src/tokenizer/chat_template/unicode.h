// UTF-8 and the Unicode properties Python's str methods use, so that string filters and methods
// (upper, lower, title, strip, split, len, indexing) agree with the jinja2 oracle on any text.
//
// Strings are UTF-8 bytes; indices and lengths seen by templates are in code points, as Python's.
// NOTE: inputs are valid UTF-8: the template source and the render context are checked once at
// the boundary (chat_template.cc); decode() does not re-validate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace inflight::jinja {

struct CodepointRange {
  char32_t first;
  char32_t last;
};

// Code points first, first + stride, ..., last map to code point + delta.
struct CaseRun {
  char32_t first;
  char32_t last;
  std::int32_t stride;
  std::int32_t delta;
};

// A code point whose mapping is several code points (e.g. U+00DF "ß" upper -> "SS").
struct CaseSpecial {
  char32_t code_point;
  const char* utf8;
};

namespace unicode {

bool is_valid_utf8(std::string_view s);

// The code point starting at s[i]; advances i past it.
char32_t decode(std::string_view s, std::size_t& i);
void append_utf8(std::string& out, char32_t cp);

// Number of code points.
std::size_t length(std::string_view s);
// Byte offset of code point `index` (0 <= index <= length(s)).
std::size_t byte_offset(std::string_view s, std::size_t index);
bool is_ascii(std::string_view s);

bool is_space(char32_t cp);      // str.isspace
bool is_printable(char32_t cp);  // str.isprintable (repr escapes the rest)
bool is_cased(char32_t cp);      // lower, upper or title case letter

void append_upper(std::string& out, char32_t cp);
void append_lower(std::string& out, char32_t cp);
void append_title(std::string& out, char32_t cp);

std::string upper(std::string_view s);       // str.upper
std::string lower(std::string_view s);       // str.lower
std::string title(std::string_view s);       // str.title
std::string capitalize(std::string_view s);  // str.capitalize

}  // namespace unicode
}  // namespace inflight::jinja
