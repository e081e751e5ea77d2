// vocab_padding_mask on the CPU: in every row exactly the columns from `begin` on become -inf,
// the others keep their values; a `begin` outside the row is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "core/check.h"
#include "op_test_util.h"
#include "ops/vocab_padding_mask.h"

namespace inflight {
namespace {

TEST(VocabPaddingMask, MasksTheTailOfEveryRow) {
  std::mt19937 rng(7);
  struct Case {
    int64_t rows, columns, begin;
  };
  for (const Case c : {Case{1, 1, 0}, Case{3, 33, 32}, Case{7, 769, 769}, Case{2, 1000, 977}}) {
    const Tensor logits = testing::random_tensor({c.rows, c.columns}, rng);
    const Tensor before = Tensor::empty({c.rows, c.columns}, DType::kF32);
    std::copy_n(logits.data<float>(), c.rows * c.columns, before.data<float>());
    vocab_padding_mask_cpu(make_vocab_padding_mask_params(logits, c.begin));
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t v = 0; v < c.columns; ++v) {
        const float now = logits.data<float>()[r * c.columns + v];
        if (v < c.begin) {
          EXPECT_EQ(now, before.data<float>()[r * c.columns + v]) << r << ", " << v;
        } else {
          EXPECT_EQ(now, -std::numeric_limits<float>::infinity()) << r << ", " << v;
        }
      }
    }
  }
}

TEST(VocabPaddingMask, RejectsABeginOutsideTheRow) {
  const Tensor logits = Tensor::zeros({2, 40}, DType::kF32);
  EXPECT_THROW(make_vocab_padding_mask_params(logits, 41), Error);
  EXPECT_THROW(make_vocab_padding_mask_params(logits, -1), Error);
  EXPECT_THROW(make_vocab_padding_mask_params(Tensor::zeros({2, 40}, DType::kI32), 3), Error);
}

}  // namespace
}  // namespace inflight
