#include "ops/gelu.h"

#include "ops/clamp.h"
#include "ops/op_test_util.h"

namespace inflight {
namespace {

using testing::error_code_of;
using testing::expect_close;
using testing::kF32RelTol;
using testing::poison;
using testing::random_tensor;

TEST(GeluCpu, MatchesTheErfReference) {
  std::mt19937 rng(23);
  for (int64_t rows : {1, 3, 91}) {
    for (int64_t cols : {1, 7, 769}) {
      const Tensor x = random_tensor({rows, cols}, rng, 6.0f);
      std::vector<double> expect(static_cast<size_t>(x.numel()));
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double v = x.data<float>()[i];
        expect[static_cast<size_t>(i)] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      }
      const Tensor out = Tensor::empty(x.shape(), DType::kF32);
      poison(out);
      gelu_cpu(make_gelu_params(x, out));
      expect_close(out, expect, kF32RelTol,
                   "gelu " + std::to_string(rows) + "x" + std::to_string(cols));
      gelu_cpu(make_gelu_params(x, x));  // in place, as the MPT MLP runs it
      expect_close(x, expect, kF32RelTol, "gelu in place");
    }
  }
}

TEST(GeluParams, RejectsMismatchedOutput) {
  std::mt19937 rng(1);
  const Tensor x = random_tensor({3, 8}, rng);
  const Tensor out = Tensor::empty({3, 7}, DType::kF32);
  EXPECT_EQ(error_code_of([&] { make_gelu_params(x, out); }), ErrorCode::kInvalidArgument);
}

TEST(ClampCpu, ClampsToTheLimitInPlace) {
  std::mt19937 rng(29);
  const Tensor x = random_tensor({7, 769}, rng, 4.0f);
  std::vector<double> expect(static_cast<size_t>(x.numel()));
  int64_t clipped = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = x.data<float>()[i];
    expect[static_cast<size_t>(i)] = std::min(std::max(v, -1.5f), 1.5f);
    clipped += std::abs(v) > 1.5f;
  }
  ASSERT_GT(clipped, 0);
  clamp_cpu(make_clamp_params(x, 1.5f));
  expect_close(x, expect, 0.0, "clamp");
}

TEST(ClampParams, RejectsANonPositiveLimit) {
  std::mt19937 rng(1);
  const Tensor x = random_tensor({3, 8}, rng);
  EXPECT_EQ(error_code_of([&] { make_clamp_params(x, 0.0f); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { make_clamp_params(x, NAN); }), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace inflight
