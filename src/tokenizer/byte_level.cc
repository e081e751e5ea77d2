#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace inflight::byte_level {

namespace {

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8;
  Tables() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_cp[b] = printable ? static_cast<char32_t>(b) : next++;
      utf8::append(to_utf8[b], to_cp[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_code_point(uint8_t byte) {
  return tables().to_cp[byte];
}

std::optional<uint8_t> code_point_to_byte(char32_t cp) {
  // Printable bytes are themselves; the rest were numbered from 256 in byte order.
  if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) {
    return static_cast<uint8_t>(cp);
  }
  if (cp < 256 || cp >= 256 + 68) return std::nullopt;
  static const std::array<uint8_t, 68> kShifted = [] {
    std::array<uint8_t, 68> a{};
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      if (!printable) a[n++] = static_cast<uint8_t>(b);
    }
    return a;
  }();
  return kShifted[cp - 256];
}

std::string encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.to_utf8[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp;
    const size_t n = utf8::decode(text, i, &cp);
    if (n == 0) return std::nullopt;
    const auto b = code_point_to_byte(cp);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
    i += n;
  }
  return out;
}

}  // namespace inflight::byte_level
