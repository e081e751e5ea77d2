// ggml type table and dequantisation: blocks built by hand with known values, and random blocks
// checked against the `gguf` Python package (fixtures/quant_types.gguf).
#include "formats/ggml_types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/dtype.h"
#include "formats/gguf.h"

namespace inflight {
namespace {

using Bytes = std::vector<uint8_t>;

const std::string kFixtures = std::string(INFLIGHT_SOURCE_DIR) + "/tests/model/fixtures";

void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

std::vector<float> run(GgmlType type, const Bytes& b, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n), std::nanf(""));  // poisoned
  dequantize_row(type, b.data(), y.data(), n);
  return y;
}

TEST(GgmlTypes, TableMatchesGgml) {
  // (id, name, block size, bytes per block) as in ggml's type_traits.
  struct Row {
    uint32_t id;
    const char* name;
    int64_t block, bytes;
  };
  for (const Row& r :
       {Row{0, "f32", 1, 4}, Row{1, "f16", 1, 2}, Row{2, "q4_0", 32, 18}, Row{3, "q4_1", 32, 20},
        Row{8, "q8_0", 32, 34}, Row{12, "q4_K", 256, 144}, Row{13, "q5_K", 256, 176},
        Row{14, "q6_K", 256, 210}, Row{23, "iq4_xs", 256, 136}, Row{30, "bf16", 1, 2},
        Row{39, "mxfp4", 32, 17}}) {
    const GgmlTypeTraits* t = ggml_type_traits(r.id);
    ASSERT_NE(t, nullptr) << r.name;
    EXPECT_EQ(t->name, r.name);
    EXPECT_EQ(t->block_size, r.block) << r.name;
    EXPECT_EQ(t->type_size, r.bytes) << r.name;
  }
  EXPECT_EQ(ggml_type_traits(4), nullptr);  // retired Q4_2
  EXPECT_EQ(ggml_type_traits(1000), nullptr);
  EXPECT_EQ(ggml_type_name(4), "unknown type 4");
  EXPECT_EQ(ggml_type_name(12), "q4_K");
}

TEST(Dequantize, Q8_0ByHand) {
  Bytes b(34);
  put_f16(b.data(), 0.5f);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  const auto y = run(GgmlType::kQ8_0, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.5f) << j;
}

TEST(Dequantize, Q4_0AndQ4_1ByHand) {
  Bytes b0(18), b1(20);
  put_f16(b0.data(), 2.0f);
  put_f16(b1.data(), 0.25f);
  put_f16(b1.data() + 2, -1.0f);
  for (int j = 0; j < 16; ++j) {
    b0[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    b1[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  }
  const auto y0 = run(GgmlType::kQ4_0, b0, 32);
  const auto y1 = run(GgmlType::kQ4_1, b1, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y0[j], (j - 8) * 2.0f);
    EXPECT_EQ(y0[j + 16], (15 - j - 8) * 2.0f);
    EXPECT_EQ(y1[j], j * 0.25f - 1.0f);
    EXPECT_EQ(y1[j + 16], (15 - j) * 0.25f - 1.0f);
  }
}

// q4_K: 8 sub-blocks of 32 with 6-bit scales/mins; values in sub-blocks 4-7 need the high bits.
TEST(Dequantize, Q4_KByHand) {
  const uint8_t sc[8] = {1, 2, 3, 63, 17, 33, 48, 62};
  const uint8_t mn[8] = {0, 5, 10, 15, 20, 40, 60, 63};
  Bytes b(144, 0);
  put_f16(b.data(), 1.0f);
  put_f16(b.data() + 2, 0.5f);
  uint8_t* s = b.data() + 4;
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((mn[j + 4] & 0x0f) << 4));
  }
  const auto q = [](int e) { return (e * 7) % 16; };
  uint8_t* qs = b.data() + 16;
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32, l = e % 32;
    uint8_t& byte = qs[(sub / 2) * 32 + l];
    byte |= static_cast<uint8_t>(sub % 2 ? q(e) << 4 : q(e));
  }
  const auto y = run(GgmlType::kQ4_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(y[e], 1.0f * sc[e / 32] * q(e) - 0.5f * mn[e / 32]) << e;
  }
}

// q6_K: 16 sub-blocks of 16 with int8 scales; 6-bit quants split over ql (4 bits) and qh (2).
TEST(Dequantize, Q6_KByHand) {
  Bytes b(210, 0);
  uint8_t* ql = b.data();
  uint8_t* qh = b.data() + 128;
  auto* scales = reinterpret_cast<int8_t*>(b.data() + 192);
  put_f16(b.data() + 208, 0.125f);
  for (int i = 0; i < 16; ++i) scales[i] = static_cast<int8_t>(i % 2 ? -(i * 7) : i * 8 - 1);
  const auto q = [](int e) { return (e * 5 + 3) % 64; };
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, n = e % 128, quadrant = n / 32, l = n % 32;
    uint8_t& low = ql[half * 64 + l + (quadrant % 2) * 32];
    low |= static_cast<uint8_t>(quadrant < 2 ? q(e) & 0x0f : (q(e) & 0x0f) << 4);
    qh[half * 32 + l] |= static_cast<uint8_t>((q(e) >> 4) << (2 * quadrant));
  }
  const auto y = run(GgmlType::kQ6_K, b, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.125f * scales[e / 16] * (q(e) - 32)) << e;
}

TEST(Dequantize, FloatFormats) {
  const std::vector<float> want = {0.0f, -2.5f, 65504.0f, 5.960464477539063e-08f,
                                   std::numeric_limits<float>::infinity()};
  Bytes f16(want.size() * 2), bf16(want.size() * 2), f32(want.size() * 4);
  for (size_t i = 0; i < want.size(); ++i) {
    put_f16(f16.data() + 2 * i, want[i]);
    const uint16_t h = f32_to_bf16(want[i]);
    std::memcpy(bf16.data() + 2 * i, &h, 2);
  }
  std::memcpy(f32.data(), want.data(), f32.size());
  EXPECT_EQ(run(GgmlType::kF16, f16, 5), want);
  EXPECT_EQ(run(GgmlType::kF32, f32, 5), want);
  const auto y = run(GgmlType::kBF16, bf16, 5);
  EXPECT_EQ(y[1], -2.5f);
  EXPECT_EQ(y[4], want[4]);
  EXPECT_NEAR(y[2], 65504.0f, 256.0f);  // bf16 keeps 8 bits of mantissa
}

TEST(Dequantize, RejectsUnsupportedAndPartialBlocks) {
  Bytes b(176, 0);
  float y[256];
  try {
    dequantize_row(GgmlType::kQ5_K, b.data(), y, 256);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("q5_K"), std::string::npos);
  }
  EXPECT_THROW(dequantize(GgmlType::kIQ2_XXS, b.data(), y, 256), Error);
  EXPECT_THROW(dequantize_row(GgmlType::kQ8_0, b.data(), y, 31), Error);
  EXPECT_THROW(dequantize(GgmlType::kQ4_K, b.data(), y, 255), Error);
}

// The parallel path splits into chunks: it must agree with the single-threaded one exactly.
TEST(Dequantize, ParallelMatchesRowWise) {
  std::mt19937 rng(7);
  const int64_t blocks = 40'000;  // 1.28M elements: many chunks
  Bytes b(static_cast<size_t>(blocks) * 34);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < blocks; ++i) put_f16(b.data() + i * 34, 0.01f * (i % 13 + 1));
  std::vector<float> a(static_cast<size_t>(blocks) * 32, -1.0f), c(a.size(), -2.0f);
  dequantize(GgmlType::kQ8_0, b.data(), a.data(), static_cast<int64_t>(a.size()));
  dequantize_row(GgmlType::kQ8_0, b.data(), c.data(), static_cast<int64_t>(c.size()));
  EXPECT_EQ(a, c);
}

// Random blocks of each type, dequantised by the `gguf` package (make_gguf_fixture.py).
TEST(Dequantize, MatchesGgufPythonPackage) {
  auto f = GgufFile::open(kFixtures + "/quant_types.gguf");
  for (const char* name : {"f32", "f16", "bf16", "q4_0", "q4_1", "q8_0", "q4_k", "q6_k"}) {
    SCOPED_TRACE(name);
    const GgufTensorInfo* t = f->find_tensor(name);
    const GgufTensorInfo* want = f->find_tensor(std::string(name) + ".expected");
    ASSERT_TRUE(t && want);
    ASSERT_EQ(t->shape, want->shape);
    const int64_t n = t->shape[0] * t->shape[1];
    std::vector<float> got(static_cast<size_t>(n), std::nanf("")), expected(got.size());
    dequantize(static_cast<GgmlType>(t->type), t->data, got.data(), n);
    std::memcpy(expected.data(), want->data, expected.size() * 4);
    double max_abs = 0;
    for (float v : expected) max_abs = std::max(max_abs, std::abs(static_cast<double>(v)));
    ASSERT_GT(max_abs, 0.0);  // the fixture is not all zeros
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(got[i], expected[i], 1e-6 * std::max(1.0, std::abs(1.0 * expected[i])))
          << "element " << i;
    }
  }
  const GgufTensorInfo* q5 = f->find_tensor("q5_k");
  ASSERT_NE(q5, nullptr);
  std::vector<float> y(256);
  EXPECT_THROW(dequantize(static_cast<GgmlType>(q5->type), q5->data, y.data(), 256), Error);
}

}  // namespace
}  // namespace inflight
