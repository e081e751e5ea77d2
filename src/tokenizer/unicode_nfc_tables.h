// Unicode data for NFC, generated into unicode_nfc_{combining_class,decomposition,composition}.cc
// by gen_unicode_tables.py.
// All arrays are sorted by their first field.
#pragma once

#include <cstddef>
#include <cstdint>

namespace inflight::unicode::tables {

struct CombiningClass {
  char32_t cp;
  uint8_t ccc;  // canonical combining class, never 0 here
};
struct Decomposition {
  char32_t cp;
  uint32_t offset;  // into kDecompositionData: the full (recursive) canonical decomposition
  uint32_t length;
};
struct Composition {
  char32_t first, second, composite;  // primary composites only (exclusions removed)
};
struct Range {
  char32_t first, last;  // inclusive
};

extern const CombiningClass kCombiningClass[];
extern const size_t kNumCombiningClass;
extern const Decomposition kDecomposition[];
extern const size_t kNumDecomposition;
extern const char32_t kDecompositionData[];
extern const Composition kComposition[];
extern const size_t kNumComposition;
// Code points that may change under NFC or interact with a neighbour: combining marks,
// decomposable characters that do not recompose to themselves, second halves of compositions.
extern const Range kNfcUnsafe[];
extern const size_t kNumNfcUnsafe;

}  // namespace inflight::unicode::tables
