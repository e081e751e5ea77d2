#include "ops/gemm.h"

#include <cstring>

#include "ops/op_test_util.h"

namespace inflight {
namespace {

using testing::error_code_of;
using testing::expect_close;
using testing::kF32RelTol;
using testing::poison;
using testing::random_tensor;

std::vector<double> reference(const Tensor& x, const Tensor& w, const Tensor* bias) {
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = bias ? bias->data<float>()[j] : 0.0;
      for (int64_t kk = 0; kk < k; ++kk) {
        s += static_cast<double>(x.data<float>()[i * k + kk]) * w.data<float>()[j * k + kk];
      }
      y[static_cast<size_t>(i * n + j)] = s;
    }
  }
  return y;
}

struct GemmShape {
  int64_t m, n, k;
};

TEST(GemmCpu, MatchesReferenceOnAwkwardShapes) {
  std::mt19937 rng(7);
  const GemmShape shapes[] = {{1, 1, 1},     {1, 769, 576}, {3, 7, 13}, {7, 17, 769},
                              {5, 64, 8},    {91, 33, 100}, {4, 4, 16}, {2, 3, 7},
                              {13, 1, 1031}, {1, 5, 1},     {8, 96, 64}};
  for (const GemmShape& s : shapes) {
    for (bool with_bias : {false, true}) {
      const Tensor x = random_tensor({s.m, s.k}, rng);
      const Tensor w = random_tensor({s.n, s.k}, rng);
      const Tensor bias = random_tensor({s.n}, rng, 2.0f);
      const Tensor y = Tensor::empty({s.m, s.n}, DType::kF32);
      poison(y);
      gemm_cpu(make_gemm_params(x, w, with_bias ? &bias : nullptr, y));
      expect_close(y, reference(x, w, with_bias ? &bias : nullptr), kF32RelTol,
                   "gemm m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                       " k=" + std::to_string(s.k) + (with_bias ? " +bias" : ""));
    }
  }
}

TEST(GemmCpu, LargeMagnitudesKeepRelativeAccuracy) {
  std::mt19937 rng(11);
  const Tensor x = random_tensor({6, 300}, rng, 1e3f);
  const Tensor w = random_tensor({10, 300}, rng, 1e2f);
  const Tensor y = Tensor::empty({6, 10}, DType::kF32);
  poison(y);
  gemm_cpu(make_gemm_params(x, w, nullptr, y));
  expect_close(y, reference(x, w, nullptr), kF32RelTol, "gemm large");
}

// A token's output must not depend on which other tokens share the batch: each row of a
// batched result equals (bitwise) the same row computed alone.
TEST(GemmCpu, RowsAreBatchInvariant) {
  std::mt19937 rng(3);
  const int64_t m = 11, n = 37, k = 203;
  const Tensor x = random_tensor({m, k}, rng);
  const Tensor w = random_tensor({n, k}, rng);
  const Tensor y = Tensor::empty({m, n}, DType::kF32);
  gemm_cpu(make_gemm_params(x, w, nullptr, y));
  for (int64_t i = 0; i < m; ++i) {
    const Tensor yi = Tensor::empty({1, n}, DType::kF32);
    gemm_cpu(make_gemm_params(x.rows(i, i + 1), w, nullptr, yi));
    EXPECT_EQ(std::memcmp(yi.raw(), y.rows(i, i + 1).raw(), yi.nbytes()), 0) << "row " << i;
  }
}

TEST(GemmCpu, ZeroRowsIsANoOp) {
  std::mt19937 rng(5);
  const Tensor x = Tensor::empty({0, 9}, DType::kF32);
  const Tensor w = random_tensor({4, 9}, rng);
  const Tensor y = Tensor::empty({0, 4}, DType::kF32);
  EXPECT_NO_THROW(gemm_cpu(make_gemm_params(x, w, nullptr, y)));
}

TEST(GemmParams, RejectsMismatchedShapesAndTypes) {
  std::mt19937 rng(1);
  const Tensor x = random_tensor({2, 8}, rng);
  const Tensor w = random_tensor({3, 8}, rng);
  const Tensor y = Tensor::empty({2, 3}, DType::kF32);
  const Tensor bad_w = random_tensor({3, 7}, rng);
  const Tensor bad_y = Tensor::empty({3, 2}, DType::kF32);
  const Tensor bad_bias = random_tensor({2}, rng);
  const Tensor i32_y = Tensor::empty({2, 3}, DType::kI32);
  EXPECT_EQ(error_code_of([&] { make_gemm_params(x, bad_w, nullptr, y); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { make_gemm_params(x, w, nullptr, bad_y); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { make_gemm_params(x, w, &bad_bias, y); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { make_gemm_params(x, w, nullptr, i32_y); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { make_gemm_params(x, w, nullptr, x); }),
            ErrorCode::kInvalidArgument);
}

// Views of the same memory labelled as two GPUs: the checks refuse them before any kernel runs,
// so no GPU is needed to test it.
TEST(GemmParams, RejectsTensorsOfTwoGpus) {
  std::mt19937 rng(2);
  const Tensor hx = random_tensor({2, 8}, rng), hw = random_tensor({3, 8}, rng);
  const Tensor hy = Tensor::empty({2, 3}, DType::kF32);
  const auto on = [](const Tensor& t, Device d) {
    return Tensor::wrap(t.raw(), t.shape(), t.dtype(), d, t.owner());
  };
  const Tensor x0 = on(hx, Device::cuda(0)), w0 = on(hw, Device::cuda(0));
  const Tensor w1 = on(hw, Device::cuda(1)), y0 = on(hy, Device::cuda(0));
  EXPECT_NO_THROW(make_gemm_params(x0, w0, nullptr, y0));
  try {
    make_gemm_params(x0, w1, nullptr, y0);
    ADD_FAILURE() << "tensors of cuda:0 and cuda:1 were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("cuda:1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace inflight
