#include "tokenizer/chat_template/string_methods.h"

#include <algorithm>

#include "tokenizer/chat_template/render_error.h"
#include "tokenizer/chat_template/unicode.h"
#include "tokenizer/chat_template/value.h"

namespace inflight::jinja::str {
namespace {

// Code points of s with their byte offsets; offsets has one extra entry: s.size().
struct CodePoints {
  std::vector<char32_t> cps;
  std::vector<std::size_t> offsets;
  explicit CodePoints(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
      offsets.push_back(i);
      cps.push_back(unicode::decode(s, i));
    }
    offsets.push_back(s.size());
  }
};

bool contains_cp(const std::optional<std::string>& chars, char32_t cp) {
  if (!chars) return unicode::is_space(cp);
  for (std::size_t i = 0; i < chars->size();) {
    if (unicode::decode(*chars, i) == cp) return true;
  }
  return false;
}

// Python slice bounds [start, end) over n items, clamped.
std::pair<std::size_t, std::size_t> bounds(long long start, long long end, std::size_t n) {
  const auto len = static_cast<long long>(n);
  if (start < 0) start = std::max(0LL, start + len);
  if (end < 0) end = std::max(0LL, end + len);
  return {static_cast<std::size_t>(std::min(start, len)),
          static_cast<std::size_t>(std::min(end, len))};
}

}  // namespace

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::size_t b = 0;
  std::size_t e = s.size();
  if (left) {
    while (b < e) {
      std::size_t next = b;
      if (!contains_cp(chars, unicode::decode(s, next))) break;
      b = next;
    }
  }
  if (right) {
    while (e > b) {
      std::size_t start = e - 1;  // back to the lead byte of the last code point
      while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      std::size_t i = start;
      if (!contains_cp(chars, unicode::decode(s, i))) break;
      e = start;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               long long maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    std::size_t start = 0;
    while (maxsplit < 0 || static_cast<long long>(out.size()) < maxsplit) {
      const std::size_t p = s.find(*sep, start);
      if (p == std::string_view::npos) break;
      out.emplace_back(s.substr(start, p - start));
      start = p + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  const CodePoints c(s);
  std::size_t i = 0;
  const std::size_t n = c.cps.size();
  while (true) {
    while (i < n && unicode::is_space(c.cps[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<long long>(out.size()) == maxsplit) {
      out.emplace_back(s.substr(c.offsets[i]));  // the rest, trailing whitespace included
      break;
    }
    std::size_t j = i;
    while (j < n && !unicode::is_space(c.cps[j])) ++j;
    out.emplace_back(s.substr(c.offsets[i], c.offsets[j] - c.offsets[i]));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                long long maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    std::size_t end = s.size();
    while (maxsplit < 0 || static_cast<long long>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const std::size_t p = s.rfind(*sep, end - sep->size());
      if (p == std::string_view::npos) break;
      out.emplace_back(s.substr(p + sep->size(), end - p - sep->size()));
      end = p;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    const CodePoints c(s);
    std::size_t j = c.cps.size();
    while (true) {
      while (j > 0 && unicode::is_space(c.cps[j - 1])) --j;
      if (j == 0) break;
      if (maxsplit >= 0 && static_cast<long long>(out.size()) == maxsplit) {
        out.emplace_back(s.substr(0, c.offsets[j]));
        break;
      }
      std::size_t i = j;
      while (i > 0 && !unicode::is_space(c.cps[i - 1])) --i;
      out.emplace_back(s.substr(c.offsets[i], c.offsets[j] - c.offsets[i]));
      j = i;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  const CodePoints c(s);
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < c.cps.size(); ++i) {
    const char32_t cp = c.cps[i];
    const bool is_break = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C ||
                          cp == 0x1D || cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!is_break) continue;
    std::size_t next = i + 1;
    if (cp == '\r' && next < c.cps.size() && c.cps[next] == '\n') ++next;
    const std::size_t end = keepends ? c.offsets[next] : c.offsets[i];
    out.emplace_back(s.substr(c.offsets[line_start], end - c.offsets[line_start]));
    line_start = next;
    i = next - 1;
  }
  if (line_start < c.cps.size()) out.emplace_back(s.substr(c.offsets[line_start]));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view replacement,
                    long long count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every code point and at the end.
    const CodePoints c(s);
    long long done = 0;
    for (std::size_t i = 0; i <= c.cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      if (i < c.cps.size()) out += s.substr(c.offsets[i], c.offsets[i + 1] - c.offsets[i]);
    }
    return out;
  }
  std::size_t start = 0;
  long long done = 0;
  while (count < 0 || done < count) {
    const std::size_t p = s.find(old, start);
    if (p == std::string_view::npos) break;
    out += s.substr(start, p - start);
    out += replacement;
    start = p + old.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

long long find(std::string_view s, std::string_view sub, long long start, long long end,
               bool reverse) {
  const CodePoints c(s);
  const long long n = static_cast<long long>(c.cps.size());
  if (start > n) return -1;
  const auto [b, e] = bounds(start, end, c.cps.size());
  if (b > e) return -1;
  const std::string_view window = s.substr(c.offsets[b], c.offsets[e] - c.offsets[b]);
  const std::size_t p = reverse ? window.rfind(sub) : window.find(sub);
  if (p == std::string_view::npos) return -1;
  return static_cast<long long>(b + unicode::length(window.substr(0, p)));
}

long long count(std::string_view s, std::string_view sub, long long start, long long end) {
  const CodePoints c(s);
  if (start > static_cast<long long>(c.cps.size())) return 0;
  const auto [b, e] = bounds(start, end, c.cps.size());
  if (b > e) return 0;
  if (sub.empty()) return static_cast<long long>(e - b) + 1;
  const std::string_view window = s.substr(c.offsets[b], c.offsets[e] - c.offsets[b]);
  long long n = 0;
  for (std::size_t p = window.find(sub); p != std::string_view::npos;
       p = window.find(sub, p + sub.size())) {
    ++n;
  }
  return n;
}

std::string pad(std::string_view s, long long width, std::string_view fill, char align) {
  if (width > static_cast<long long>(kMaxResultSize)) render_fail("string is too large");
  const long long len = static_cast<long long>(unicode::length(s));
  if (width <= len) return std::string(s);
  const long long margin = width - len;
  long long left = 0;
  if (align == '^') {
    left = margin / 2 + (margin & width & 1);
  } else if (align == '>') {
    left = margin;
  }
  std::string out;
  for (long long i = 0; i < left; ++i) out += fill;
  out += s;
  for (long long i = 0; i < margin - left; ++i) out += fill;
  return out;
}

}  // namespace inflight::jinja::str
