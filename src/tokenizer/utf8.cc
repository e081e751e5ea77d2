#include "tokenizer/utf8.h"

namespace inflight::utf8 {

namespace {

// How many bytes of a sequence starting at s[pos] are a valid prefix (the maximal subpart),
// and whether the whole sequence is complete. Ranges per Unicode Table 3-7.
struct Prefix {
  size_t valid;   // bytes that belong to the (possibly incomplete) sequence
  bool complete;  // valid == the announced length
};

Prefix scan(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {1, true};
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {0, false};  // stray continuation byte, C0/C1, F5..FF
  }
  size_t i = 1;
  for (; i < need; ++i) {
    if (pos + i >= s.size()) return {i, false};  // truncated
    const auto b = static_cast<uint8_t>(s[pos + i]);
    const uint8_t l = i == 1 ? lo : 0x80;
    const uint8_t h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return {i, false};
  }
  return {need, true};
}

}  // namespace

size_t decode(std::string_view s, size_t pos, char32_t* cp) {
  const Prefix p = scan(s, pos);
  if (!p.complete) return 0;
  const auto* u = reinterpret_cast<const uint8_t*>(s.data() + pos);
  switch (p.valid) {
    case 1:
      *cp = u[0];
      break;
    case 2:
      *cp = (char32_t(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
      break;
    case 3:
      *cp = (char32_t(u[0] & 0x0F) << 12) | (char32_t(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
      break;
    default:
      *cp = (char32_t(u[0] & 0x07) << 18) | (char32_t(u[1] & 0x3F) << 12) |
            (char32_t(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
  }
  return p.valid;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Prefix p = scan(s, i);
    if (!p.complete) return false;
    i += p.valid;
  }
  return true;
}

size_t repair(std::string_view in, std::string& out, bool final) {
  size_t i = 0;
  size_t run = 0;  // start of the pending run of valid bytes, copied in one go
  while (i < in.size()) {
    if (static_cast<uint8_t>(in[i]) < 0x80) {
      ++i;
      continue;
    }
    const Prefix p = scan(in, i);
    if (p.complete) {
      i += p.valid;
      continue;
    }
    out.append(in.substr(run, i - run));
    if (!final && i + p.valid == in.size() && p.valid > 0) return i;  // could still complete
    out.append(kReplacement);
    i += p.valid == 0 ? 1 : p.valid;
    run = i;
  }
  out.append(in.substr(run));
  return in.size();
}

std::string_view sanitize(std::string_view in, std::string& storage) {
  if (is_valid(in)) return in;
  storage.clear();
  storage.reserve(in.size() + 8);
  repair(in, storage, /*final=*/true);
  return storage;
}

}  // namespace inflight::utf8
