#include "ops/rms_norm.h"

#include "ops/op_test_util.h"

namespace inflight {
namespace {

using testing::error_code_of;
using testing::expect_close;
using testing::kF32RelTol;
using testing::poison;
using testing::random_tensor;

TEST(RmsNormCpu, MatchesReferenceWithAndWithoutResidualAdd) {
  std::mt19937 rng(17);
  for (int64_t rows : {1, 3, 7, 91}) {
    for (int64_t dim : {1, 7, 576, 769}) {
      for (bool with_add : {false, true}) {
        const float eps = 1e-5f;
        const Tensor residual = random_tensor({rows, dim}, rng, 3.0f);
        const Tensor add = random_tensor({rows, dim}, rng, 2.0f);
        const Tensor weight = random_tensor({dim}, rng, 1.5f);
        std::vector<double> expect_res(static_cast<size_t>(rows * dim));
        std::vector<double> expect_out(expect_res.size());
        for (int64_t r = 0; r < rows; ++r) {
          double sum_sq = 0.0;
          for (int64_t i = 0; i < dim; ++i) {
            // The residual itself is stored in f32: round the sum the way the kernel must.
            const float v = residual.data<float>()[r * dim + i] +
                            (with_add ? add.data<float>()[r * dim + i] : 0.0f);
            expect_res[static_cast<size_t>(r * dim + i)] = v;
            sum_sq += static_cast<double>(v) * v;
          }
          const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps);
          for (int64_t i = 0; i < dim; ++i) {
            const size_t at = static_cast<size_t>(r * dim + i);
            expect_out[at] = expect_res[at] * inv * weight.data<float>()[i];
          }
        }
        const Tensor out = Tensor::empty({rows, dim}, DType::kF32);
        poison(out);
        rms_norm_cpu(make_rms_norm_params(with_add ? &add : nullptr, residual, weight, eps, out));
        const std::string what = "rms_norm rows=" + std::to_string(rows) +
                                 " dim=" + std::to_string(dim) + (with_add ? " +add" : "");
        expect_close(out, expect_out, kF32RelTol, what);
        expect_close(residual, expect_res, 0.0, what + " (residual)");
      }
    }
  }
}

TEST(RmsNormCpu, TinyAndHugeRowsStayFinite) {
  std::mt19937 rng(2);
  const Tensor residual = random_tensor({2, 64}, rng);
  for (int64_t i = 0; i < 64; ++i) {
    residual.data<float>()[i] *= 1e-20f;      // row 0: far below eps
    residual.data<float>()[64 + i] *= 1e18f;  // row 1: squares overflow f32
  }
  const Tensor weight = random_tensor({64}, rng);
  const Tensor out = Tensor::empty({2, 64}, DType::kF32);
  poison(out);
  rms_norm_cpu(make_rms_norm_params(nullptr, residual, weight, 1e-6f, out));
  EXPECT_EQ(testing::count_nan(out.data<float>(), out.numel()), 0);
  for (int64_t i = 0; i < 128; ++i) EXPECT_TRUE(std::isfinite(out.data<float>()[i])) << i;
}

TEST(RmsNormParams, RejectsBadArguments) {
  std::mt19937 rng(1);
  const Tensor residual = random_tensor({3, 8}, rng);
  const Tensor weight = random_tensor({8}, rng);
  const Tensor out = Tensor::empty({3, 8}, DType::kF32);
  const Tensor bad_weight = random_tensor({7}, rng);
  const Tensor bad_add = random_tensor({2, 8}, rng);
  EXPECT_EQ(error_code_of([&] { make_rms_norm_params(nullptr, residual, bad_weight, 1e-5f, out); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { make_rms_norm_params(&bad_add, residual, weight, 1e-5f, out); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      error_code_of([&] { make_rms_norm_params(nullptr, residual, weight, 1e-5f, residual); }),
      ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { make_rms_norm_params(nullptr, residual, weight, 0.0f, out); }),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace inflight
