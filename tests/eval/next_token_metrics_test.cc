// The metric math of `inflight eval` on hand-made logits, where each expected value is computed
// here from explicit probabilities: a formula that forgets to normalise, swaps the KL's
// arguments, or averages perplexities instead of NLLs gives another number.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "eval/next_token_metrics.h"

namespace inflight::eval {
namespace {

// Logits for probabilities `p`, shifted by `shift` (a softmax ignores the shift).
std::vector<float> logits_of(const std::vector<double>& p, double shift) {
  std::vector<float> z;
  for (const double v : p) z.push_back(static_cast<float>(std::log(v) + shift));
  return z;
}

double kl_of(const std::vector<double>& p, const std::vector<double>& q) {
  double kl = 0.0;
  for (size_t i = 0; i < p.size(); ++i) kl += p[i] * std::log(p[i] / q[i]);
  return kl;
}

Tensor rows_tensor(const std::vector<std::vector<float>>& rows) {
  Tensor t = Tensor::empty(
      {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.front().size())}, DType::kF32);
  float* out = t.data<float>();
  for (const auto& r : rows) out = std::copy(r.begin(), r.end(), out);
  return t;
}

TEST(NextTokenMetrics, LogSumExpIsShiftedAndExact) {
  const std::vector<float> z = {1.0f, 2.0f, 3.0f};
  EXPECT_NEAR(log_sum_exp(z), std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-12);
  // Large logits do not overflow: log(e^1000 + e^1000) = 1000 + log 2.
  const std::vector<float> big = {1000.0f, 1000.0f};
  EXPECT_NEAR(log_sum_exp(big), 1000.0 + std::log(2.0), 1e-9);
}

TEST(NextTokenMetrics, ArgmaxTakesTheLowestIdAmongTies) {
  const std::vector<float> z = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(argmax(z), 1);
  const std::vector<float> first = {3.0f, 1.0f, 3.0f};
  EXPECT_EQ(argmax(first), 0);
}

TEST(NextTokenMetrics, KlDivergenceOfKnownDistributions) {
  const std::vector<double> p = {0.7, 0.2, 0.1}, q = {0.4, 0.4, 0.2};
  // Different shifts: only normalised log-probabilities give the right value.
  const std::vector<float> zp = logits_of(p, 3.0), zq = logits_of(q, -5.0);
  const double kl = kl_divergence(zp, log_sum_exp(zp), zq, log_sum_exp(zq));
  EXPECT_NEAR(kl, kl_of(p, q), 1e-6);  // 0.18378
  // Not symmetric: KL(q || p) = 0.19205 is another number.
  EXPECT_GT(std::fabs(kl - kl_of(q, p)), 5e-3);
  EXPECT_NEAR(kl_divergence(zq, log_sum_exp(zq), zp, log_sum_exp(zp)), kl_of(q, p), 1e-6);
  // Identical distributions (even with different shifts): exactly 0, never negative.
  const std::vector<float> zp2 = logits_of(p, -7.0);
  EXPECT_NEAR(kl_divergence(zp, log_sum_exp(zp), zp2, log_sum_exp(zp2)), 0.0, 1e-6);
  EXPECT_EQ(kl_divergence(zp, log_sum_exp(zp), zp, log_sum_exp(zp)), 0.0);
  // A candidate that gives a reference token probability 0: infinite.
  std::vector<float> zero = zq;
  zero[0] = -std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(kl_divergence(zp, log_sum_exp(zp), zero, log_sum_exp(zero))));
}

TEST(NextTokenMetrics, PerplexityIsExpOfTheMeanNll) {
  NextTokenMetrics m;
  m.add({std::log(2.0), 0.1, true});   // the target had probability 1/2
  m.add({std::log(8.0), 0.3, false});  // 1/8
  EXPECT_EQ(m.num_tokens(), 2);
  EXPECT_NEAR(m.mean_nll(), 2.0 * std::log(2.0), 1e-12);
  EXPECT_NEAR(m.perplexity(), 4.0, 1e-12);  // not (2 + 8) / 2
  EXPECT_NEAR(m.mean_kl(), 0.2, 1e-12);
  EXPECT_NEAR(m.max_kl(), 0.3, 1e-12);
  EXPECT_NEAR(m.top1_agreement(), 0.5, 1e-12);
  NextTokenMetrics other;
  other.add({std::log(4.0), 0.5, true});
  m.merge(other);
  EXPECT_NEAR(m.perplexity(), 4.0, 1e-12);  // exp((ln 2 + ln 8 + ln 4) / 3) = 4
  EXPECT_NEAR(m.mean_kl(), 0.3, 1e-12);
  EXPECT_NEAR(m.max_kl(), 0.5, 1e-12);
  EXPECT_NEAR(m.top1_agreement(), 2.0 / 3.0, 1e-12);
}

TEST(NextTokenMetrics, ScoreRowsAgainstAReference) {
  // Two positions over a vocabulary of 4; targets 1 and 3.
  const std::vector<double> p0 = {0.1, 0.6, 0.2, 0.1}, p1 = {0.25, 0.25, 0.1, 0.4};
  const std::vector<double> q0 = {0.3, 0.4, 0.2, 0.1}, q1 = {0.5, 0.2, 0.1, 0.2};
  const ReferenceRows ref =
      prepare_reference(rows_tensor({logits_of(p0, 1.0), logits_of(p1, 0.0)}));
  EXPECT_EQ(ref.top1, (std::vector<int32_t>{1, 3}));
  const std::vector<int32_t> targets = {1, 3};

  const NextTokenMetrics self = score_rows(ref, nullptr, targets, "reference");
  EXPECT_EQ(self.num_tokens(), 2);
  EXPECT_NEAR(self.mean_nll(), -(std::log(0.6) + std::log(0.4)) / 2, 1e-6);
  EXPECT_EQ(self.mean_kl(), 0.0);
  EXPECT_EQ(self.top1_agreement(), 1.0);

  const Tensor cand = rows_tensor({logits_of(q0, 2.0), logits_of(q1, -1.0)});
  const NextTokenMetrics m = score_rows(ref, &cand, targets, "candidate");
  EXPECT_NEAR(m.mean_nll(), -(std::log(0.4) + std::log(0.2)) / 2, 1e-6);
  EXPECT_NEAR(m.mean_kl(), (kl_of(p0, q0) + kl_of(p1, q1)) / 2, 1e-6);
  EXPECT_NEAR(m.max_kl(), std::max(kl_of(p0, q0), kl_of(p1, q1)), 1e-6);
  EXPECT_NEAR(m.top1_agreement(), 0.5, 1e-12);  // row 0 agrees (1), row 1 does not (0 vs 3)

  // Fewer targets than rows: only those rows count.
  EXPECT_EQ(score_rows(ref, &cand, std::vector<int32_t>{1}, "candidate").num_tokens(), 1);
}

TEST(NextTokenMetrics, ScoreRowsRefusesNonFiniteLogitsAndBadTargets) {
  const ReferenceRows ref = prepare_reference(rows_tensor({{0.0f, 1.0f, 2.0f}}));
  const Tensor nan = rows_tensor({{0.0f, std::nanf(""), 2.0f}});
  EXPECT_THROW(score_rows(ref, &nan, std::vector<int32_t>{0}, "nan mode"), Error);
  EXPECT_THROW(score_rows(ref, nullptr, std::vector<int32_t>{3}, "reference"), Error);
  const Tensor narrow = rows_tensor({{0.0f, 1.0f}});
  EXPECT_THROW(score_rows(ref, &narrow, std::vector<int32_t>{0}, "narrow"), Error);
}

}  // namespace
}  // namespace inflight::eval
