#include "tokenizer/chat_template/unicode.h"

#include <algorithm>
#include <cstring>

namespace inflight::jinja {

namespace unicode_tables {
extern const CodepointRange kNonPrintable[];
extern const std::size_t kNonPrintableSize;
extern const CodepointRange kCased[];
extern const std::size_t kCasedSize;
extern const CaseRun kUpperRuns[], kLowerRuns[], kTitleRuns[];
extern const std::size_t kUpperRunsSize, kLowerRunsSize, kTitleRunsSize;
extern const CaseSpecial kUpperSpecial[], kLowerSpecial[], kTitleSpecial[];
extern const std::size_t kUpperSpecialSize, kLowerSpecialSize, kTitleSpecialSize;
}  // namespace unicode_tables

namespace unicode {
namespace {

bool in_ranges(const CodepointRange* ranges, std::size_t n, char32_t cp) {
  const CodepointRange* end = ranges + n;
  // First range whose last >= cp.
  const CodepointRange* it = std::lower_bound(
      ranges, end, cp, [](const CodepointRange& r, char32_t c) { return r.last < c; });
  return it != end && it->first <= cp;
}

struct CaseTable {
  const CaseRun* runs;
  std::size_t num_runs;
  const CaseSpecial* special;
  std::size_t num_special;
};

void append_mapped(std::string& out, char32_t cp, const CaseTable& t) {
  for (std::size_t i = 0; i < t.num_special; ++i) {
    if (t.special[i].code_point == cp) {
      out += t.special[i].utf8;
      return;
    }
  }
  const CaseRun* end = t.runs + t.num_runs;
  const CaseRun* it =
      std::lower_bound(t.runs, end, cp, [](const CaseRun& r, char32_t c) { return r.last < c; });
  if (it != end && it->first <= cp && (cp - it->first) % it->stride == 0) {
    append_utf8(out, static_cast<char32_t>(static_cast<std::int32_t>(cp) + it->delta));
    return;
  }
  append_utf8(out, cp);
}

const CaseTable kUpper{unicode_tables::kUpperRuns, unicode_tables::kUpperRunsSize,
                       unicode_tables::kUpperSpecial, unicode_tables::kUpperSpecialSize};
const CaseTable kLower{unicode_tables::kLowerRuns, unicode_tables::kLowerRunsSize,
                       unicode_tables::kLowerSpecial, unicode_tables::kLowerSpecialSize};
const CaseTable kTitle{unicode_tables::kTitleRuns, unicode_tables::kTitleRunsSize,
                       unicode_tables::kTitleSpecial, unicode_tables::kTitleSpecialSize};

}  // namespace

bool is_valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    // ASCII runs, 8 bytes at a time.
    while (i + 8 <= s.size()) {
      std::uint64_t word;
      std::memcpy(&word, s.data() + i, 8);
      if ((word & 0x8080808080808080ULL) != 0) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    char32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated sequence
    for (std::size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid.
    static constexpr char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

char32_t decode(std::string_view s, std::size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  std::size_t n = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : 3;
  char32_t cp = c & (n == 1 ? 0x1F : n == 2 ? 0x0F : 0x07);
  for (std::size_t k = 1; k <= n && i + k < s.size(); ++k) {
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  }
  i += n + 1;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::size_t length(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::size_t byte_offset(std::string_view s, std::size_t index) {
  std::size_t i = 0;
  while (index > 0 && i < s.size()) {
    decode(s, i);
    --index;
  }
  return i;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c & 0x80) == 0; });
}

bool is_space(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_printable(char32_t cp) {
  if (cp < 0x80) return cp >= 0x20 && cp < 0x7F;
  return !in_ranges(unicode_tables::kNonPrintable, unicode_tables::kNonPrintableSize, cp);
}

bool is_cased(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  return in_ranges(unicode_tables::kCased, unicode_tables::kCasedSize, cp);
}

void append_upper(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp >= 'a' && cp <= 'z' ? cp - 32 : cp);
    return;
  }
  append_mapped(out, cp, kUpper);
}

void append_lower(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    return;
  }
  append_mapped(out, cp, kLower);
}

void append_title(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    append_upper(out, cp);
    return;
  }
  append_mapped(out, cp, kTitle);
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) append_upper(out, decode(s, i));
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) append_lower(out, decode(s, i));
  return out;
}

std::string title(std::string_view s) {
  // Python: a cased character after a cased one is lowered, otherwise title-cased.
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  for (std::size_t i = 0; i < s.size();) {
    const char32_t cp = decode(s, i);
    if (previous_cased) {
      append_lower(out, cp);
    } else {
      append_title(out, cp);
    }
    previous_cased = is_cased(cp);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool first = true;
  for (std::size_t i = 0; i < s.size(); first = false) {
    const char32_t cp = decode(s, i);
    if (first) {
      append_title(out, cp);
    } else {
      append_lower(out, cp);
    }
  }
  return out;
}

}  // namespace unicode
}  // namespace inflight::jinja
