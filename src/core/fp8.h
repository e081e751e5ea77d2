// FP8 e4m3 (OCP "e4m3fn", CUDA __nv_fp8_e4m3) on the host: 1 sign, 4 exponent (bias 7) and 3
// mantissa bits; no infinities, 0x7f/0xff are NaN, the largest finite value is 448 and the
// smallest subnormal 2^-9.
//
// f32_to_e4m3 rounds to nearest even and saturates to +-448 (CUDA's __NV_SATFINITE), so the CPU
// reference produces the bytes a CUDA kernel's __nv_cvt_float_to_fp8 produces.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace inflight {

inline constexpr float kE4M3Max = 448.0f;

inline float e4m3_to_f32(uint8_t v) {
  const float sign = (v & 0x80u) ? -1.0f : 1.0f;
  const uint32_t exp = (v >> 3) & 0xfu, mant = v & 0x7u;
  if (exp == 0xfu && mant == 0x7u) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);
  return sign * std::ldexp(static_cast<float>(8 + mant), static_cast<int>(exp) - 10);
}

inline uint8_t f32_to_e4m3(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const auto sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7fu;        // NaN
  if (abs >= 0x43e00000u) return sign | 0x7eu;       // >= 448 (and inf): saturate
  if (abs >= 0x3c800000u) {                          // >= 2^-6: normal
    uint32_t v = (abs - (120u << 23)) >> 20;         // rebias 127 -> 7, keep 3 mantissa bits
    const uint32_t rem = abs & 0xfffffu;
    if (rem > 0x80000u || (rem == 0x80000u && (v & 1u))) ++v;
    return static_cast<uint8_t>(sign | v);
  }
  // Subnormal (or zero): multiples of 2^-9; a * 512 is exact, nearbyint rounds to even.
  float a;
  std::memcpy(&a, &abs, 4);
  return static_cast<uint8_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 512.0f)));
}

// The 256 values of e4m3 as f32 (index = the byte), for dequantising loops.
const float* e4m3_table();

}  // namespace inflight
