// Element types of compute tensors, and scalar conversions between them on the host.
// (Quantized file formats such as Q4_K are a property of model files: see model/ggml_types.h.)
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace inflight {

// kF8E4M3: OCP e4m3fn (no infinities, 0x7f/0xff NaN, largest finite 448), core/fp8.h.
enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64, kU8, kF8E4M3 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kF8E4M3: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t);

// IEEE half -> float, exact (subnormals, inf and NaN included).
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// float -> IEEE half, round to nearest even.
inline uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {                                              // subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t v = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (v & 1u))) ++v;
    return static_cast<uint16_t>(sign | v);
  }
  uint32_t v = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (v & 1u))) ++v;
  return static_cast<uint16_t>(sign | v);
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// float -> bfloat16, round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace inflight
