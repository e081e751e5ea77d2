#include "ops/layer_norm.h"

#include "ops/op_test_util.h"

namespace inflight {
namespace {

using testing::error_code_of;
using testing::expect_close;
using testing::kF32RelTol;
using testing::poison;
using testing::random_tensor;

TEST(LayerNormCpu, MatchesReferenceWithAndWithoutResidualAddAndBias) {
  std::mt19937 rng(19);
  for (int64_t rows : {1, 3, 7, 91}) {
    for (int64_t dim : {1, 7, 576, 769}) {
      for (bool with_add : {false, true}) {
        for (bool with_bias : {false, true}) {
          const float eps = 1e-5f;
          // A mean far from zero: a one-pass variance would lose it.
          Tensor residual = random_tensor({rows, dim}, rng, 3.0f);
          for (int64_t i = 0; i < residual.numel(); ++i) residual.data<float>()[i] += 40.0f;
          const Tensor add = random_tensor({rows, dim}, rng, 2.0f);
          const Tensor weight = random_tensor({dim}, rng, 1.5f);
          const Tensor bias = random_tensor({dim}, rng, 0.5f);
          std::vector<double> expect_res(static_cast<size_t>(rows * dim));
          std::vector<double> expect_out(expect_res.size());
          for (int64_t r = 0; r < rows; ++r) {
            double sum = 0.0;
            for (int64_t i = 0; i < dim; ++i) {
              const float v = residual.data<float>()[r * dim + i] +
                              (with_add ? add.data<float>()[r * dim + i] : 0.0f);
              expect_res[static_cast<size_t>(r * dim + i)] = v;
              sum += v;
            }
            const double mean = sum / static_cast<double>(dim);
            double var = 0.0;
            for (int64_t i = 0; i < dim; ++i) {
              const double c = expect_res[static_cast<size_t>(r * dim + i)] - mean;
              var += c * c;
            }
            const double inv = 1.0 / std::sqrt(var / static_cast<double>(dim) + eps);
            for (int64_t i = 0; i < dim; ++i) {
              const size_t at = static_cast<size_t>(r * dim + i);
              expect_out[at] = (expect_res[at] - mean) * inv * weight.data<float>()[i] +
                               (with_bias ? bias.data<float>()[i] : 0.0);
            }
          }
          const Tensor out = Tensor::empty({rows, dim}, DType::kF32);
          poison(out);
          layer_norm_cpu(make_layer_norm_params(with_add ? &add : nullptr, residual, weight,
                                                with_bias ? &bias : nullptr, eps, out));
          const std::string what = "layer_norm rows=" + std::to_string(rows) +
                                   " dim=" + std::to_string(dim) + (with_add ? " +add" : "") +
                                   (with_bias ? " +bias" : "");
          expect_close(out, expect_out, kF32RelTol, what);
          expect_close(residual, expect_res, 0.0, what + " (residual)");
        }
      }
    }
  }
}

TEST(LayerNormParams, RejectsBadArguments) {
  std::mt19937 rng(1);
  const Tensor residual = random_tensor({3, 8}, rng);
  const Tensor weight = random_tensor({8}, rng);
  const Tensor out = Tensor::empty({3, 8}, DType::kF32);
  const Tensor bad_bias = random_tensor({7}, rng);
  EXPECT_NO_THROW(make_layer_norm_params(nullptr, residual, weight, &weight, 1e-5f, out));
  EXPECT_EQ(error_code_of(
                [&] { make_layer_norm_params(nullptr, residual, weight, &bad_bias, 1e-5f, out); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] {
              make_layer_norm_params(nullptr, residual, weight, nullptr, 1e-5f, residual);
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      error_code_of([&] { make_layer_norm_params(nullptr, residual, weight, nullptr, 0.0f, out); }),
      ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace inflight
