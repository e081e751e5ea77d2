// ggml tensor types as stored in GGUF files: the type table (block size, bytes per block) and
// dequantisation to f32 for the types we read.
//
// A quantized tensor is a sequence of blocks; each block packs `block_size` consecutive
// elements of the innermost dimension into `type_size` bytes. Rows (ne[0]) are whole blocks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace inflight {

// The ids are ggml's (ggml.h `enum ggml_type`); gaps are ids ggml retired.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
};

struct GgmlTypeTraits {
  std::string_view name;  // as ggml spells it: "q4_K", "bf16"
  int64_t block_size;     // elements per block
  int64_t type_size;      // bytes per block
  bool can_dequantize;    // dequantize() handles it
};

// Traits of a type id, or nullptr for an id no ggml release defines.
const GgmlTypeTraits* ggml_type_traits(uint32_t type);
// "q4_K", or "unknown type 99" for an undefined id.
std::string ggml_type_name(uint32_t type);

// Dequantises n elements (n % block_size == 0) of `type` from src into dst, single-threaded.
// Throws Error(kUnsupported) for a type that cannot be dequantised.
void dequantize_row(GgmlType type, const uint8_t* src, float* dst, int64_t n);

// Same over a whole tensor, split across ThreadPool::global() when it is large.
// NOTE: must not be called from inside a ThreadPool::global() parallel_for (it would wait on
// itself); the checks that can throw all run before any work is handed to the pool.
void dequantize(GgmlType type, const uint8_t* src, float* dst, int64_t n);

}  // namespace inflight
