#include "ops/qk_norm.h"

#include <cstring>
#include <tuple>

#include "ops/op_test_util.h"

namespace inflight {
namespace {

using testing::error_code_of;
using testing::expect_close;
using testing::kF32RelTol;
using testing::random_tensor;

TEST(QkNormCpu, NormalisesQAndKHeadsAndLeavesV) {
  std::mt19937 rng(31);
  // (H, KH, D): GQA 3, one head of 2, MHA with D 128, GQA 7 with a D that is no power of two.
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {6, 2, 8}, {1, 1, 2}, {4, 4, 128}, {7, 1, 62}};
  for (int64_t tokens : {1, 3, 7, 91}) {
    for (const auto& [heads, kv_heads, dim] : shapes) {
      const int64_t cols = (heads + 2 * kv_heads) * dim;
      const Tensor qkv = random_tensor({tokens, cols}, rng, 3.0f);
      const Tensor before = Tensor::empty({tokens, cols}, DType::kF32);
      std::memcpy(before.raw(), qkv.raw(), qkv.nbytes());
      const Tensor qw = random_tensor({dim}, rng, 2.0f), kw = random_tensor({dim}, rng, 2.0f);
      const float eps = 1e-6f;
      qk_norm_cpu(make_qk_norm_params(qkv, heads, kv_heads, qw, kw, eps));

      std::vector<double> expect(static_cast<size_t>(tokens * cols));
      const float* x = before.data<float>();
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t h = 0; h < heads + 2 * kv_heads; ++h) {
          const float* head = x + t * cols + h * dim;
          double* out = expect.data() + t * cols + h * dim;
          if (h >= heads + kv_heads) {  // v: untouched
            for (int64_t j = 0; j < dim; ++j) out[j] = head[j];
            continue;
          }
          const float* w = (h < heads ? qw : kw).data<float>();
          double sum_sq = 0.0;
          for (int64_t j = 0; j < dim; ++j) sum_sq += double{head[j]} * head[j];
          const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps);
          for (int64_t j = 0; j < dim; ++j) out[j] = head[j] * inv * w[j];
        }
      }
      const std::string what =
          fmt::format("qk_norm T={} H={} KH={} D={}", tokens, heads, kv_heads, dim);
      expect_close(qkv, expect, kF32RelTol, what);
      // v is bit for bit what it was.
      for (int64_t t = 0; t < tokens; ++t) {
        const int64_t v = t * cols + (heads + kv_heads) * dim;
        EXPECT_EQ(std::memcmp(qkv.data<float>() + v, x + v, kv_heads * dim * sizeof(float)), 0)
            << what;
      }
    }
  }
}

TEST(QkNormParams, RejectsMismatchedShapes) {
  std::mt19937 rng(2);
  const Tensor qkv = random_tensor({3, (4 + 2 * 2) * 8}, rng);
  const Tensor w8 = random_tensor({8}, rng), w4 = random_tensor({4}, rng);
  EXPECT_NO_THROW(make_qk_norm_params(qkv, 4, 2, w8, w8, 1e-6f));
  EXPECT_EQ(error_code_of([&] { make_qk_norm_params(qkv, 4, 1, w8, w8, 1e-6f); }),
            ErrorCode::kInvalidArgument);  // columns do not match the heads
  EXPECT_EQ(error_code_of([&] { make_qk_norm_params(qkv, 4, 2, w8, w4, 1e-6f); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { make_qk_norm_params(qkv, 4, 2, w8, w8, 0.0f); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { make_qk_norm_params(qkv, 0, 2, w8, w8, 1e-6f); }),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace inflight
