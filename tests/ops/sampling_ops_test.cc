// fill_random and top_k_logits on the CPU (the references of the CUDA kernels, tests/cuda):
// fills are a pure function of (seed, index), in range, and not constant; top_k_logits picks the
// k best entries with ties to the lower id and a log-sum-exp accurate to f32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "op_test_util.h"
#include "ops/fill_random.h"
#include "ops/top_k_logits.h"

namespace inflight::testing {
namespace {

TEST(FillRandom, DeterministicInRangeAndSpread) {
  for (const int64_t n : {int64_t{1}, int64_t{769}, int64_t{100003}}) {
    Tensor a = Tensor::empty({n}, DType::kF32), b = Tensor::empty({n}, DType::kF32);
    poison(a);
    fill_random_cpu(make_fill_random_params(a, 77, 0.5f, 1.0f));
    fill_random_cpu(make_fill_random_params(b, 77, 0.5f, 1.0f));
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = a.data<float>()[i];
      ASSERT_EQ(v, b.data<float>()[i]);
      ASSERT_GE(v, 0.5f);
      ASSERT_LT(v, 1.5f);
      sum += v;
    }
    if (n > 1000) {
      EXPECT_NEAR(sum / static_cast<double>(n), 1.0, 0.01);
    }
    fill_random_cpu(make_fill_random_params(b, 78, 0.5f, 1.0f));
    if (n > 1) {
      EXPECT_NE(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << "seed changes values";
    }
  }
}

TEST(TopKLogits, BestFirstTiesToTheLowerIdAndLogSumExp) {
  std::mt19937 rng(9);
  for (const int64_t vocab : {int64_t{1}, int64_t{7}, int64_t{97}, int64_t{4099}}) {
    for (const int32_t k : {1, 2, 5, 64, 256}) {
      if (k > vocab) continue;
      const int64_t rows = 5;
      Tensor logits = Tensor::empty({rows, vocab}, DType::kF32);
      std::uniform_int_distribution<int> level(-30, 30);  // many exact ties
      for (int64_t i = 0; i < logits.numel(); ++i) {
        logits.data<float>()[i] = static_cast<float>(level(rng)) * 0.5f;
      }
      float* last = logits.data<float>() + (rows - 1) * vocab;  // a row of -inf but one entry
      std::fill_n(last, vocab, -INFINITY);
      last[vocab / 2] = 0.0f;
      Tensor lse = Tensor::empty({rows}, DType::kF32), ids = Tensor::empty({rows, k}, DType::kI32);
      Tensor vals = Tensor::empty({rows, k}, DType::kF32);
      top_k_logits_cpu(make_top_k_logits_params(logits, k, lse, ids, vals));
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = logits.data<float>() + r * vocab;
        std::vector<int32_t> order(static_cast<size_t>(vocab));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return row[a] > row[b]; });
        double m = -INFINITY;
        for (int64_t i = 0; i < vocab; ++i) m = std::max(m, static_cast<double>(row[i]));
        double sum = 0.0;
        for (int64_t i = 0; i < vocab; ++i) sum += std::exp(row[i] - m);
        EXPECT_NEAR(lse.data<float>()[r], m + std::log(sum), 1e-5 * std::max(1.0, std::abs(m)));
        for (int32_t j = 0; j < k; ++j) {
          ASSERT_EQ(ids.data<int32_t>()[r * k + j], order[static_cast<size_t>(j)])
              << "vocab " << vocab << " k " << k << " row " << r << " rank " << j;
          ASSERT_EQ(vals.data<float>()[r * k + j], row[order[static_cast<size_t>(j)]]);
        }
      }
    }
  }
}

TEST(TopKLogits, RejectsBadShapes) {
  Tensor logits = Tensor::empty({2, 10}, DType::kF32);
  Tensor lse = Tensor::empty({2}, DType::kF32), ids = Tensor::empty({2, 11}, DType::kI32);
  Tensor vals = Tensor::empty({2, 11}, DType::kF32);
  EXPECT_THROW(make_top_k_logits_params(logits, 11, lse, ids, vals), Error);  // k > vocab
  EXPECT_THROW(make_top_k_logits_params(logits, 3, lse, ids, vals), Error);   // wrong ids shape
}

}  // namespace
}  // namespace inflight::testing
