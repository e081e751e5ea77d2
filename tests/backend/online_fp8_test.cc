// Online FP8 (model/online_fp8.h, model/linear_loader.h) on the CPU backend: weights quantized
// per tensor, per channel and in 128 x 128 blocks dequantise to within e4m3's rounding of the
// originals, with scales of the documented shapes; fused parts keep their own scales; and the
// CPU's scaled GEMM over such a layer equals an explicit emulation written out here
// (quantize x, round to e4m3, scale, sum) from the stored bytes and scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/fp8.h"
#include "model/linear_loader.h"
#include "model/online_fp8.h"
#include "ops/op_test_util.h"

namespace inflight {
namespace {

using WeightScales = Quantization::WeightScales;
using ActivationScales = Quantization::ActivationScales;

// Rows of different magnitudes (so per tensor, per channel and blocks scale differently), and
// one all-zero 128 x 128 block when the shape has room for it.
Tensor weight(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor w = testing::random_tensor({n, k}, rng);
  float* p = w.data<float>();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) p[r * k + c] *= std::pow(2.0f, static_cast<float>(r % 7) - 3);
  }
  if (n >= 256 && k >= 256) {
    for (int64_t r = 128; r < 256; ++r) std::fill_n(p + r * k + 128, 128, 0.0f);
  }
  return w;
}

std::vector<float> scales_of(const StoredTensor& t) {
  const Tensor s = to_host_f32(*t.scale);
  return {s.data<float>(), s.data<float>() + s.numel()};
}

struct Granularity {
  int64_t rows, cols;  // of the block each scale covers
};

Granularity granularity(const OnlineFp8Scheme& s, int64_t n, int64_t k) {
  if (s.weights == WeightScales::kTensor) return {n, k};
  if (s.weights == WeightScales::kChannel) return {1, k};
  return {s.block_rows, s.block_cols};
}

const OnlineFp8Scheme kTensor = OnlineFp8Scheme::of(Quantization::online("fp8-tensor"));
const OnlineFp8Scheme kChannel = OnlineFp8Scheme::of(Quantization::online("fp8-channel"));
const OnlineFp8Scheme kBlock = OnlineFp8Scheme::of(Quantization::online("fp8-block"));

TEST(OnlineFp8, QuantizedWeightsDequantizeWithinE4m3Rounding) {
  const int64_t n = 300, k = 257;  // partial blocks in both dimensions
  const Tensor w = weight(n, k, 1);
  const float* src = w.data<float>();
  for (const OnlineFp8Scheme& scheme : {kTensor, kChannel, kBlock}) {
    SCOPED_TRACE(static_cast<int>(scheme.weights));
    const StoredTensor q = quantize_weight_e4m3("layer.weight", w, scheme);
    EXPECT_EQ(q.type, StoredType::kF8E4M3);
    EXPECT_EQ(q.shape, (Shape{n, k}));
    const Shape expected_scale_shape = scheme.weights == WeightScales::kTensor    ? Shape{1}
                                       : scheme.weights == WeightScales::kChannel ? Shape{n}
                                                                                  : Shape{3, 3};
    EXPECT_EQ(q.scale->shape, expected_scale_shape);
    EXPECT_EQ(q.block_rows, scheme.weights == WeightScales::kBlock ? 128 : 0);
    EXPECT_EQ(q.block_cols, scheme.weights == WeightScales::kBlock ? 128 : 0);
    const std::vector<float> scales = scales_of(q);
    const Granularity g = granularity(scheme, n, k);
    const int64_t scale_cols = (k + g.cols - 1) / g.cols;
    // Each scale is its block's amax / 448 (1 for the all-zero block), so the largest element
    // of a block becomes +-448: the whole e4m3 range is used.
    std::vector<float> amax(scales.size(), 0.0f);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < k; ++c) {
        float& a = amax[static_cast<size_t>((r / g.rows) * scale_cols + c / g.cols)];
        a = std::max(a, std::fabs(src[r * k + c]));
      }
    }
    int64_t zero_blocks = 0;
    for (size_t i = 0; i < scales.size(); ++i) {
      EXPECT_EQ(scales[i], amax[i] > 0.0f ? amax[i] / kE4M3Max : 1.0f) << "scale " << i;
      zero_blocks += amax[i] == 0.0f;
    }
    EXPECT_EQ(zero_blocks, scheme.weights == WeightScales::kBlock ? 1 : 0);
    int64_t at_max = 0;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < k; ++c) {
        const int64_t i = r * k + c;
        const float s = scales[static_cast<size_t>((r / g.rows) * scale_cols + c / g.cols)];
        const float stored = e4m3_to_f32(q.data[i]);
        const double deq = static_cast<double>(stored) * s;
        // Half an ulp of 3 mantissa bits (2^-4 relative), or of the subnormal step 2^-9.
        const double bound = std::max(std::fabs(src[i]) * 0x1p-4, s * 0x1p-10) * 1.0001;
        ASSERT_LE(std::fabs(deq - src[i]), bound) << "element " << r << ", " << c;
        at_max += std::fabs(stored) == kE4M3Max;
      }
    }
    EXPECT_GE(at_max, static_cast<int64_t>(scales.size()) - zero_blocks);
  }
}

// A fused layer of `parts` (rows each, k columns) planned and loaded as --quantization `name`.
struct FusedLayer {
  std::vector<Tensor> originals;
  Linear linear;
};

FusedLayer load_fused(CpuBackend& backend, const char* name, const std::vector<int64_t>& rows,
                      int64_t k) {
  FusedLayer out;
  PlannedWeight pw;
  int64_t n = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    Tensor t = weight(rows[i], k, static_cast<uint32_t>(10 + i));
    // Parts of different magnitudes: a scale shared across parts would show.
    for (int64_t e = 0; e < t.numel(); ++e) t.data<float>()[e] *= static_cast<float>(1 + 7 * i);
    pw.parts.push_back(StoredTensor::from_host("model.layers.0.self_attn." +
                                                   std::string(i == 0   ? "q"
                                                               : i == 1 ? "k"
                                                                        : "v") +
                                                   "_proj.weight",
                                               t));
    out.originals.push_back(t);
    n += rows[i];
  }
  pw.shape = {n, k};
  pw.dtype = backend.compute_dtype();
  const PlannedLinear plan =
      plan_linear(backend, Quantization::online(name), "model.layers.0.self_attn.qkv", pw);
  EXPECT_TRUE(plan.fp8());
  EXPECT_TRUE(plan.quantize_online);
  load_linear(backend, plan, out.linear);
  return out;
}

TEST(OnlineFp8, FusedPerTensorPartsKeepTheirOwnScale) {
  CpuBackend backend;
  const FusedLayer l = load_fused(backend, "fp8-tensor", {40, 24, 24}, 64);
  EXPECT_EQ(l.linear.weight.dtype(), DType::kF8E4M3);
  EXPECT_EQ(l.linear.activations, ActivationScales::kDynamicToken);
  ASSERT_EQ(l.linear.scale.shape(), (Shape{88}));  // per channel: what dynamic GEMMs read
  const float* s = l.linear.scale.data<float>();
  int64_t row = 0;
  for (const Tensor& part : l.originals) {
    float amax = 0.0f;
    for (int64_t e = 0; e < part.numel(); ++e)
      amax = std::max(amax, std::fabs(part.data<float>()[e]));
    for (int64_t r = 0; r < part.size(0); ++r, ++row) EXPECT_EQ(s[row], amax / kE4M3Max) << row;
  }
}

TEST(OnlineFp8, FusedBlocksStayBlocksWhenAlignedElseBecomeRowGroups) {
  CpuBackend backend;
  const FusedLayer aligned = load_fused(backend, "fp8-block", {128, 60}, 200);
  EXPECT_EQ(aligned.linear.block_rows, 128);
  EXPECT_EQ(aligned.linear.block_cols, 128);
  EXPECT_EQ(aligned.linear.activations, ActivationScales::kDynamicGroup);
  EXPECT_EQ(aligned.linear.scale.shape(), (Shape{2, 4}));  // 2 groups per row padded to 4

  // Parts of 100 and 60 rows: the second starts inside a block row, so each row takes its own
  // part's block-row scales (1 x 128 groups), values unchanged.
  const FusedLayer split = load_fused(backend, "fp8-block", {100, 60}, 200);
  EXPECT_EQ(split.linear.block_rows, 1);
  ASSERT_EQ(split.linear.scale.shape(), (Shape{160, 4}));
  const StoredTensor first = quantize_weight_e4m3("q", split.originals[0], kBlock);
  const StoredTensor second = quantize_weight_e4m3("k", split.originals[1], kBlock);
  const float* s = split.linear.scale.data<float>();
  EXPECT_EQ(s[99 * 4 + 1], scales_of(first)[1]);
  EXPECT_EQ(s[100 * 4 + 0], scales_of(second)[0]);
  EXPECT_EQ(s[100 * 4 + 2], 0.0f);  // padding
  EXPECT_EQ(std::memcmp(split.linear.weight.raw(), first.data, 100 * 200), 0);
  EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(split.linear.weight.raw()) + 100 * 200,
                        second.data, 60 * 200),
            0);
}

// y = x W^T written out: x quantized per token (or per token and 128 columns), w from the
// stored bytes and scales, products summed in double.
std::vector<double> emulate(const Tensor& x, const StoredTensor& w, const OnlineFp8Scheme& scheme) {
  const int64_t m = x.size(0), k = x.size(1), n = w.shape[0];
  const Granularity g = granularity(scheme, n, k);
  const int64_t group = scheme.weights == WeightScales::kBlock ? 128 : k;
  const int64_t scale_cols = (k + g.cols - 1) / g.cols;
  const std::vector<float> ws = scales_of(w);
  std::vector<double> y(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    const float* row = x.data<float>() + i * k;
    for (int64_t c0 = 0; c0 < k; c0 += group) {
      const int64_t c1 = std::min(k, c0 + group);
      float amax = 0.0f;
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(row[c]));
      const float sx = amax > 0.0f ? amax / kE4M3Max : 1.0f;
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0.0;
        for (int64_t c = c0; c < c1; ++c) {
          const double xq = e4m3_to_f32(f32_to_e4m3(row[c] * (1.0f / sx)));
          dot += xq * e4m3_to_f32(w.data[j * k + c]);
        }
        const float sw = ws[static_cast<size_t>((j / g.rows) * scale_cols + c0 / g.cols)];
        y[static_cast<size_t>(i * n + j)] += static_cast<double>(sx) * sw * dot;
      }
    }
  }
  return y;
}

TEST(OnlineFp8, CpuGemmEqualsAnExplicitEmulation) {
  CpuBackend backend;
  const int64_t m = 7, n = 131, k = 300;  // k: groups of 128, 128 and 44
  const Tensor w = weight(n, k, 3);
  std::mt19937 rng(5);
  Tensor x = testing::random_tensor({m, k}, rng, 2.0f);
  x.data<float>()[3] = 40.0f;  // an outlier: per-token vs per-group scales differ
  for (const char* name : {"fp8-tensor", "fp8-channel", "fp8-block"}) {
    SCOPED_TRACE(name);
    const Quantization q = Quantization::online(name);
    const OnlineFp8Scheme scheme = OnlineFp8Scheme::of(q);
    const Linear linear = quantize_linear_online(backend, w, scheme, "layer");
    const StoredTensor stored = quantize_weight_e4m3("layer", w, scheme);
    ASSERT_EQ(std::memcmp(linear.weight.raw(), stored.data, static_cast<size_t>(n * k)), 0);

    const int64_t groups = linear.activations == ActivationScales::kDynamicGroup ? 3 : 1;
    const QuantizedActivations qa{
        backend.alloc({m, k}, DType::kF8E4M3),
        backend.alloc(groups == 1 ? Shape{m} : Shape{groups, m}, DType::kF32)};
    quantize_for(backend, x, linear, qa);
    const Tensor y = backend.alloc({m, n}, DType::kF32);
    testing::poison(y);
    backend.gemm(qa, linear, y);
    testing::expect_close(y, emulate(x, stored, scheme), testing::kF32RelTol, name);
  }
}

}  // namespace
}  // namespace inflight
