// token_bitmask on the CPU: only the listed rows change, exactly the tokens whose bit is clear
// become -inf, and bad shapes or rows are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "core/check.h"
#include "op_test_util.h"
#include "ops/token_bitmask.h"

namespace inflight {
namespace {

TEST(TokenBitmask, MasksListedRowsBitByBit) {
  std::mt19937 rng(5);
  for (const int64_t vocab : {int64_t{1}, int64_t{31}, int64_t{32}, int64_t{33}, int64_t{1000}}) {
    const int64_t rows = 4, words = (vocab + 31) / 32;
    const Tensor logits = testing::random_tensor({rows, vocab}, rng);
    const Tensor before = Tensor::empty({rows, vocab}, DType::kF32);
    std::copy_n(logits.data<float>(), rows * vocab, before.data<float>());
    Tensor masked = Tensor::empty({2}, DType::kI32);
    masked.data<int32_t>()[0] = 3;
    masked.data<int32_t>()[1] = 1;
    Tensor bits = Tensor::empty({2, words}, DType::kI32);
    for (int64_t i = 0; i < 2 * words; ++i) bits.data<int32_t>()[i] = static_cast<int32_t>(rng());
    token_bitmask_cpu(make_token_bitmask_params(logits, masked, bits));
    const auto* mask = reinterpret_cast<const uint32_t*>(bits.data<int32_t>());
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t m = r == 3 ? 0 : r == 1 ? 1 : -1;
      for (int64_t v = 0; v < vocab; ++v) {
        const float was = before.data<float>()[r * vocab + v];
        const float now = logits.data<float>()[r * vocab + v];
        const bool allowed = m < 0 || ((mask[m * words + v / 32] >> (v % 32)) & 1u) != 0;
        if (allowed) {
          EXPECT_EQ(now, was) << "row " << r << " token " << v;
        } else {
          EXPECT_EQ(now, -std::numeric_limits<float>::infinity()) << "row " << r << " token " << v;
        }
      }
    }
  }
}

TEST(TokenBitmask, RejectsBadShapesAndRows) {
  const Tensor logits = Tensor::zeros({2, 40}, DType::kF32);
  Tensor rows = Tensor::zeros({1}, DType::kI32);
  EXPECT_THROW(make_token_bitmask_params(logits, rows, Tensor::zeros({1, 1}, DType::kI32)), Error);
  EXPECT_THROW(make_token_bitmask_params(logits, rows, Tensor::zeros({1, 2}, DType::kF32)), Error);
  rows.data<int32_t>()[0] = 2;
  const Tensor bits = Tensor::zeros({1, 2}, DType::kI32);
  EXPECT_THROW(token_bitmask_cpu(make_token_bitmask_params(logits, rows, bits)), Error);
}

}  // namespace
}  // namespace inflight
