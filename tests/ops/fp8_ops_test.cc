// quantize_fp8 and scaled_gemm on the CPU against their definitions (ops/quantize_fp8.h,
// ops/scaled_gemm.h), computed here in double from the e4m3 values.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/fp8.h"
#include "ops/op_test_util.h"
#include "ops/quantize_fp8.h"
#include "ops/scaled_gemm.h"

namespace inflight {
namespace {

using testing::error_code_of;
using testing::expect_close;
using testing::random_tensor;

struct Quantized {
  Tensor values, scales;
};

Quantized quantize(const Tensor& x, int64_t group, const Tensor* static_scale = nullptr) {
  const int64_t m = x.size(0), k = x.size(1);
  Quantized q{
      Tensor::empty({m, k}, DType::kF8E4M3),
      Tensor::empty(group == 0 ? Shape{m} : Shape{(k + group - 1) / group, m}, DType::kF32)};
  quantize_fp8_cpu(make_quantize_fp8_params(x, static_scale, group, q.values, q.scales));
  return q;
}

TEST(QuantizeFp8Cpu, ScalesEachRowOrGroupToItsMaximum) {
  std::mt19937 rng(5);
  for (const int64_t group : {int64_t{0}, int64_t{128}, int64_t{32}}) {
    for (const int64_t k : {int64_t{1}, int64_t{100}, int64_t{576}, int64_t{1000}}) {
      const int64_t m = 7;
      Tensor x = random_tensor({m, k}, rng, 3.0f);
      std::fill_n(x.data<float>() + 2 * k, k, 0.0f);  // an all-zero row
      const Quantized q = quantize(x, group);
      const int64_t g = group == 0 ? k : group;
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t c0 = 0, j = 0; c0 < k; c0 += g, ++j) {
          const int64_t c1 = std::min(k, c0 + g);
          float amax = 0.0f;
          for (int64_t c = c0; c < c1; ++c)
            amax = std::max(amax, std::fabs(x.data<float>()[r * k + c]));
          const float scale = q.scales.data<float>()[group == 0 ? r : j * m + r];
          EXPECT_EQ(scale, amax > 0 ? amax / 448.0f : 1.0f) << r << " " << j;
          for (int64_t c = c0; c < c1; ++c) {
            const uint8_t v = static_cast<const uint8_t*>(q.values.raw())[r * k + c];
            EXPECT_EQ(v, f32_to_e4m3(x.data<float>()[r * k + c] * (1.0f / scale)));
          }
        }
      }
    }
  }
}

TEST(QuantizeFp8Cpu, GathersRowsThroughXRows) {
  // Output row r quantizes x's row x_rows[r] / x_row_div: the MoE's pairs in expert order.
  std::mt19937 rng(9);
  const int64_t m = 5, k = 96;
  const Tensor x = random_tensor({m, k}, rng, 3.0f);
  const Quantized whole = quantize(x, 0);
  const std::vector<int32_t> pairs = {9, 0, 4, 5, 1, 8, 3};  // sorted pairs of top-2: token p / 2
  Quantized q{Tensor::empty({7, k}, DType::kF8E4M3), Tensor::empty({7}, DType::kF32)};
  QuantizeFp8Params p = make_quantize_fp8_params(x, nullptr, 0, whole.values, whole.scales);
  p.x_rows = pairs.data();
  p.x_row_div = 2;
  p.values = static_cast<uint8_t*>(q.values.raw());
  p.scales = q.scales.data<float>();
  p.m = 7;
  quantize_fp8_cpu(p);
  for (int64_t r = 0; r < 7; ++r) {
    const int64_t src = pairs[static_cast<size_t>(r)] / 2;
    EXPECT_EQ(q.scales.data<float>()[r], whole.scales.data<float>()[src]) << r;
    EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(q.values.raw()) + r * k,
                          static_cast<const uint8_t*>(whole.values.raw()) + src * k, k),
              0)
        << r;
  }
}

TEST(QuantizeFp8Cpu, StaticScaleSaturates) {
  Tensor x = Tensor::empty({2, 3}, DType::kF32);
  const float v[] = {1.0f, -2.0f, 1000.0f, 0.5f, 0.0f, -1000.0f};
  std::copy(v, v + 6, x.data<float>());
  Tensor s = Tensor::empty({1}, DType::kF32);
  s.data<float>()[0] = 0.5f;
  const Quantized q = quantize(x, 0, &s);
  const auto* b = static_cast<const uint8_t*>(q.values.raw());
  EXPECT_EQ(e4m3_to_f32(b[0]), 2.0f);
  EXPECT_EQ(e4m3_to_f32(b[1]), -4.0f);
  EXPECT_EQ(e4m3_to_f32(b[2]), 448.0f);  // 2000 saturates
  EXPECT_EQ(e4m3_to_f32(b[5]), -448.0f);
  EXPECT_EQ(q.scales.data<float>()[0], 0.5f);
  EXPECT_EQ(q.scales.data<float>()[1], 0.5f);
  EXPECT_EQ(error_code_of([&] { quantize(x, 128, &s); }), ErrorCode::kInvalidArgument);
}

// A weight [n, k] quantized as a Linear of the given scheme, with host scales.
Linear make_weight(int64_t n, int64_t k, Quantization::WeightScales kind, int64_t block,
                   std::mt19937& rng) {
  const Tensor w = random_tensor({n, k}, rng, 0.2f);
  Linear lin;
  lin.weight = Tensor::empty({n, k}, DType::kF8E4M3);
  auto* out = static_cast<uint8_t*>(lin.weight.raw());
  const float* src = w.data<float>();
  using WS = Quantization::WeightScales;
  if (kind == WS::kBlock) {
    const int64_t rows = (n + block - 1) / block, groups = (k + block - 1) / block;
    const int64_t stride = (groups + 3) / 4 * 4;
    lin.scale = Tensor::empty({rows, stride}, DType::kF32);
    std::fill_n(lin.scale.data<float>(), lin.scale.numel(), 0.0f);
    for (int64_t br = 0; br < rows; ++br) {
      for (int64_t g = 0; g < groups; ++g) {
        float amax = 0.0f;
        for (int64_t r = br * block; r < std::min(n, (br + 1) * block); ++r)
          for (int64_t c = g * block; c < std::min(k, (g + 1) * block); ++c)
            amax = std::max(amax, std::fabs(src[r * k + c]));
        const float s = amax / 448.0f;
        lin.scale.data<float>()[br * stride + g] = s;
        for (int64_t r = br * block; r < std::min(n, (br + 1) * block); ++r)
          for (int64_t c = g * block; c < std::min(k, (g + 1) * block); ++c)
            out[r * k + c] = f32_to_e4m3(src[r * k + c] / s);
      }
    }
    lin.block_rows = lin.block_cols = block;
    lin.activations = Quantization::ActivationScales::kDynamicGroup;
    return lin;
  }
  const bool per_tensor = kind == WS::kTensor;
  lin.scale = Tensor::empty({per_tensor ? 1 : n}, DType::kF32);
  float tensor_amax = 0.0f;
  for (int64_t e = 0; e < n * k; ++e) tensor_amax = std::max(tensor_amax, std::fabs(src[e]));
  for (int64_t r = 0; r < n; ++r) {
    float amax = tensor_amax;
    if (!per_tensor) {
      amax = 0.0f;
      for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(src[r * k + c]));
    }
    const float s = amax / 448.0f;
    lin.scale.data<float>()[per_tensor ? 0 : r] = s;
    for (int64_t c = 0; c < k; ++c) out[r * k + c] = f32_to_e4m3(src[r * k + c] / s);
  }
  return lin;
}

// y = dequant(x) dequant(w)^T in double.
std::vector<double> reference(const Quantized& x, const Linear& w, int64_t group) {
  const int64_t m = x.values.size(0), k = x.values.size(1), n = w.weight.size(0);
  const auto* xv = static_cast<const uint8_t*>(x.values.raw());
  const auto* wv = static_cast<const uint8_t*>(w.weight.raw());
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t c = 0; c < k; ++c) {
        const int64_t g = group == 0 ? 0 : c / group;
        const double sx = x.scales.data<float>()[group == 0 ? i : g * m + i];
        double sw;
        if (w.block_cols > 0) {
          sw = w.scale.data<float>()[(j / w.block_rows) * w.scale.size(1) + g];
        } else {
          sw = w.scale.data<float>()[w.scale.numel() == 1 ? 0 : j];
        }
        acc += double(e4m3_to_f32(xv[i * k + c])) * sx * double(e4m3_to_f32(wv[j * k + c])) * sw;
      }
      if (w.bias.defined()) acc += w.bias.data<float>()[j];
      y[static_cast<size_t>(i * n + j)] = acc;
    }
  }
  return y;
}

TEST(ScaledGemmCpu, MatchesDequantizedProductInEveryScheme) {
  std::mt19937 rng(11);
  using WS = Quantization::WeightScales;
  for (const WS kind : {WS::kTensor, WS::kChannel, WS::kBlock}) {
    for (const int64_t m : {int64_t{1}, int64_t{5}, int64_t{33}}) {
      for (const auto [n, k] : {std::pair<int64_t, int64_t>{1, 16}, {37, 200}, {130, 592}}) {
        const int64_t group = kind == WS::kBlock ? 128 : 0;
        Linear w = make_weight(n, k, kind, 128, rng);
        if (m == 5) w.bias = random_tensor({n}, rng);
        const Quantized x = quantize(random_tensor({m, k}, rng, 2.0f), group);
        const Tensor y = Tensor::empty({m, n}, DType::kF32);
        testing::poison(y);
        scaled_gemm_cpu(make_scaled_gemm_params({x.values, x.scales}, w, y));
        expect_close(y, reference(x, w, group), 1e-5,
                     fmt::format("kind {} m {} n {} k {}", int(kind), m, n, k));
      }
    }
  }
}

TEST(ScaledGemmCpu, RowsDoNotDependOnTheBatch) {
  std::mt19937 rng(3);
  const Linear w = make_weight(64, 300, Quantization::WeightScales::kChannel, 0, rng);
  const Quantized x = quantize(random_tensor({9, 300}, rng), 0);
  const Tensor all = Tensor::empty({9, 64}, DType::kF32);
  scaled_gemm_cpu(make_scaled_gemm_params({x.values, x.scales}, w, all));
  const Tensor one = Tensor::empty({1, 64}, DType::kF32);
  scaled_gemm_cpu(make_scaled_gemm_params({x.values.rows(4, 5), x.scales.rows(4, 5)}, w, one));
  EXPECT_EQ(std::memcmp(one.raw(), all.data<float>() + 4 * 64, 64 * sizeof(float)), 0);
}

TEST(ScaledGemmParams, RejectsMismatchedSchemes) {
  std::mt19937 rng(2);
  const Linear channel = make_weight(8, 32, Quantization::WeightScales::kChannel, 0, rng);
  const Quantized grouped = quantize(random_tensor({2, 32}, rng), 16);
  const Tensor y = Tensor::empty({2, 8}, DType::kF32);
  EXPECT_EQ(error_code_of([&] {
              make_scaled_gemm_params({grouped.values, grouped.scales}, channel, y);
            }),
            ErrorCode::kInvalidArgument);
  Linear bad = channel;
  bad.scale = Tensor::empty({7}, DType::kF32);  // neither [1] nor [n]
  const Quantized x = quantize(random_tensor({2, 32}, rng), 0);
  EXPECT_EQ(error_code_of([&] {
              make_scaled_gemm_params({x.values, x.scales}, bad, y);
            }),
            ErrorCode::kInvalidArgument);
  Linear static_without_scale = channel;
  static_without_scale.activations = Quantization::ActivationScales::kStaticTensor;
  EXPECT_EQ(error_code_of([&] {
              make_scaled_gemm_params({x.values, x.scales}, static_without_scale, y);
            }),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace inflight
