#include "core/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace inflight {
namespace {

TEST(Fp8E4M3, DecodesTheFormat) {
  EXPECT_EQ(e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x07), 7.0f * std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0x39), 1.125f);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
  for (int b = 0; b < 256; ++b) {
    const float a = e4m3_table()[b], e = e4m3_to_f32(uint8_t(b));
    EXPECT_TRUE(a == e || (std::isnan(a) && std::isnan(e))) << b;
  }
}

TEST(Fp8E4M3, EveryValueRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(uint8_t(b))), b) << b;
  }
}

TEST(Fp8E4M3, RoundsToNearestEvenAndSaturates) {
  // Between 1 (0x38) and 1.125 (0x39): the midpoint goes to the even mantissa (0x38).
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);
  EXPECT_EQ(f32_to_e4m3(1.0626f), 0x39);
  // Between 1.125 (0x39) and 1.25 (0x3a): the midpoint goes to 0x3a.
  EXPECT_EQ(f32_to_e4m3(1.1875f), 0x3a);
  // Subnormals: 1.5 * 2^-9 is a midpoint between 0x01 and 0x02 -> 0x02; 0.5 * 2^-9 -> 0.
  EXPECT_EQ(f32_to_e4m3(1.5f * std::ldexp(1.0f, -9)), 0x02);
  EXPECT_EQ(f32_to_e4m3(0.5f * std::ldexp(1.0f, -9)), 0x00);
  EXPECT_EQ(f32_to_e4m3(-0.75f * std::ldexp(1.0f, -9)), 0x81);
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(f32_to_e4m3(7.5f * std::ldexp(1.0f, -9)), 0x08);
  // Saturation (CUDA's __NV_SATFINITE): past 448 and infinities clamp, NaN stays NaN.
  EXPECT_EQ(f32_to_e4m3(460.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(1e9f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(f32_to_e4m3(std::nanf("")) & 0x7f, 0x7f);
  // Against the nearest representable value by search, over a sweep.
  for (float x = -500.0f; x <= 500.0f; x += 0.173f) {
    float best = 0.0f, best_err = INFINITY;
    for (int b = 0; b < 256; ++b) {
      if ((b & 0x7f) == 0x7f) continue;
      const float v = e4m3_to_f32(uint8_t(b));
      const float err = std::fabs(v - std::fmax(-448.0f, std::fmin(448.0f, x)));
      if (err < best_err) best_err = err, best = v;
    }
    EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(x)), best) << x;
  }
}

}  // namespace
}  // namespace inflight
