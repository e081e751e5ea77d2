#include "ops/swiglu.h"

#include "ops/op_test_util.h"

namespace inflight {
namespace {

using testing::error_code_of;
using testing::expect_close;
using testing::kF32RelTol;
using testing::poison;
using testing::random_tensor;

TEST(SwigluCpu, MatchesReference) {
  std::mt19937 rng(23);
  for (int64_t rows : {1, 3, 7, 91}) {
    for (int64_t inter : {1, 13, 769, 1536}) {
      // Gates up to +-40 reach the saturated ends of the sigmoid.
      const Tensor gate_up = random_tensor({rows, 2 * inter}, rng, 40.0f);
      const float* g = gate_up.data<float>();
      std::vector<double> expect(static_cast<size_t>(rows * inter));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < inter; ++i) {
          const double gate = g[r * 2 * inter + i], up = g[r * 2 * inter + inter + i];
          expect[static_cast<size_t>(r * inter + i)] = gate / (1.0 + std::exp(-gate)) * up;
        }
      }
      const Tensor out = Tensor::empty({rows, inter}, DType::kF32);
      poison(out);
      swiglu_cpu(make_swiglu_params(gate_up, out));
      expect_close(out, expect, kF32RelTol,
                   "swiglu rows=" + std::to_string(rows) + " inter=" + std::to_string(inter));
    }
  }
}

TEST(SwigluParams, RejectsOddOrMismatchedShapes) {
  std::mt19937 rng(1);
  const Tensor odd = random_tensor({2, 7}, rng);
  const Tensor gate_up = random_tensor({2, 8}, rng);
  const Tensor out = Tensor::empty({2, 4}, DType::kF32);
  const Tensor bad_out = Tensor::empty({2, 8}, DType::kF32);
  EXPECT_EQ(error_code_of([&] { make_swiglu_params(odd, out); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { make_swiglu_params(gate_up, bad_out); }),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace inflight
