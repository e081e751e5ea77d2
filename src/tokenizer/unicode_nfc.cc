#include "tokenizer/unicode_nfc.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode_nfc_tables.h"
#include "tokenizer/utf8.h"

namespace inflight::unicode {

namespace {

namespace t = tables;

// Hangul syllables compose and decompose algorithmically (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  const auto* end = t::kCombiningClass + t::kNumCombiningClass;
  const auto* it = std::lower_bound(
      t::kCombiningClass, end, cp, [](const t::CombiningClass& e, char32_t c) { return e.cp < c; });
  return (it != end && it->cp == cp) ? it->ccc : 0;
}

bool is_unsafe(char32_t cp) {
  if (cp < 0x300) return false;
  const auto* end = t::kNfcUnsafe + t::kNumNfcUnsafe;
  const auto* it = std::upper_bound(t::kNfcUnsafe, end, cp,
                                    [](char32_t c, const t::Range& r) { return c < r.first; });
  return it != t::kNfcUnsafe && cp <= (it - 1)->last;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto* end = t::kDecomposition + t::kNumDecomposition;
  const auto* it = std::lower_bound(t::kDecomposition, end, cp,
                                    [](const t::Decomposition& e, char32_t c) { return e.cp < c; });
  if (it != end && it->cp == cp) {
    out.insert(out.end(), t::kDecompositionData + it->offset,
               t::kDecompositionData + it->offset + it->length);
  } else {
    out.push_back(cp);
  }
}

// The primary composite of (a, b), or 0.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const auto* end = t::kComposition + t::kNumComposition;
  const auto* it =
      std::lower_bound(t::kComposition, end, std::pair{a, b},
                       [](const t::Composition& e, std::pair<char32_t, char32_t> k) {
                         return e.first < k.first || (e.first == k.first && e.second < k.second);
                       });
  return (it != end && it->first == a && it->second == b) ? it->composite : 0;
}

}  // namespace

bool is_nfc_quick(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<uint8_t>(text[i]);
    if (b < 0xCC) {  // below U+0300 (lead bytes C0..CB): nothing NFC touches
      i += utf8::sequence_length(b);
      continue;
    }
    char32_t cp;
    const size_t n = utf8::decode(text, i, &cp);
    if (n == 0) return false;
    if (is_unsafe(cp)) return false;
    i += n;
  }
  return true;
}

std::string nfc(std::string_view text) {
  // 1. Full canonical decomposition.
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp;
    size_t n = utf8::decode(text, i, &cp);
    if (n == 0) {  // invalid input: keep U+FFFD, never read out of bounds
      cp = 0xFFFD;
      n = 1;
    }
    decompose(cp, cps);
    i += n;
  }
  // 2. Canonical ordering: stable sort of every run of non-starters by combining class.
  for (size_t s = 0; s < cps.size();) {
    if (combining_class(cps[s]) == 0) {
      ++s;
      continue;
    }
    size_t e = s;
    while (e < cps.size() && combining_class(cps[e]) != 0) ++e;
    std::stable_sort(cps.begin() + s, cps.begin() + e, [](char32_t a, char32_t b) {
      return combining_class(a) < combining_class(b);
    });
    s = e;
  }
  // 3. Canonical composition: each character combines with the last starter unless blocked
  // (a character between them has a class >= its own, or is a starter).
  std::vector<char32_t> out;
  out.reserve(cps.size());
  size_t starter = SIZE_MAX;  // index in `out` of the last starter
  int last_ccc = -1;          // class of the last character appended after the starter
  for (char32_t cp : cps) {
    const int ccc = combining_class(cp);
    if (starter != SIZE_MAX) {
      const bool blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= ccc);
      if (!blocked) {
        if (const char32_t c = compose_pair(out[starter], cp)) {
          out[starter] = c;
          continue;
        }
      }
    }
    if (ccc == 0) {
      starter = out.size();
      last_ccc = -1;
    } else {
      last_ccc = ccc;
    }
    out.push_back(cp);
  }
  std::string s;
  s.reserve(text.size());
  for (char32_t cp : out) utf8::append(s, cp);
  return s;
}

}  // namespace inflight::unicode
