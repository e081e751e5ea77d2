#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "core/check.h"

namespace inflight {
namespace {

// logits = log(probs): softmax gives probs back exactly (up to rounding).
std::vector<float> log_probs(std::vector<double> probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

// Frequencies of each token over `n` seeds.
std::map<int32_t, double> frequencies(const std::vector<float>& logits, const SamplingParams& p,
                                      int n) {
  Sampler sampler(static_cast<int64_t>(logits.size()));
  std::map<int32_t, double> freq;
  for (int s = 0; s < n; ++s) {
    auto row = logits;
    SamplingContext ctx{&p, {}, {}, static_cast<uint64_t>(s) * 7919u + 1, 0, {}};
    freq[sampler.sample(row, ctx, nullptr)] += 1.0 / n;
  }
  return freq;
}

TEST(Sampler, GreedyTakesTheArgmaxAndBreaksTiesToTheLowestId) {
  Sampler sampler(5);
  SamplingParams p;
  p.temperature = 0.0f;
  std::vector<float> row = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f};
  SamplingContext ctx{&p, {}, {}, 42, 0, {}};
  EXPECT_EQ(sampler.sample(row, ctx, nullptr), 1);
  row = {-5.0f, -5.0f, -5.0f, -5.0f, -4.0f};
  EXPECT_EQ(sampler.sample(row, ctx, nullptr), 4);
}

// A model whose numbers broke (NaN weights) must fail the request, greedy or not, whole row or
// candidates: an argmax over NaN picks some token as if nothing were wrong.
TEST(Sampler, NonFiniteLogitsAreAnErrorNotAToken) {
  Sampler sampler(4);
  for (const float bad : {NAN, INFINITY}) {
    for (const float t : {0.0f, 1.0f}) {
      SamplingParams p;
      p.temperature = t;
      SamplingContext ctx{&p, {}, {}, 42, 0, {}};
      std::vector<float> row = {0.5f, bad, -1.0f, 2.0f};
      EXPECT_THROW(sampler.sample(row, ctx, nullptr), Error) << bad << " at temperature " << t;
      const std::vector<int32_t> ids = {3, 0};
      const std::vector<float> top = {2.0f, 0.5f};
      const LogitsView candidates{{}, ids, top, bad};  // the row's sum carries the NaN
      EXPECT_THROW(sampler.sample(candidates, ctx, nullptr), Error);
    }
  }
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingContext ctx{&greedy, {}, {}, 42, 0, {}};
  std::vector<float> masked = {-INFINITY, 1.0f, -INFINITY, 0.0f};
  EXPECT_EQ(sampler.sample(masked, ctx, nullptr), 1) << "-inf is a masked token, not an error";
}

TEST(Sampler, TemperatureOneFollowsTheSoftmax) {
  const auto logits = log_probs({0.1, 0.2, 0.3, 0.4});
  SamplingParams p;
  const auto freq = frequencies(logits, p, 20000);
  for (int32_t t = 0; t < 4; ++t) EXPECT_NEAR(freq.at(t), 0.1 * (t + 1), 0.015) << t;
}

TEST(Sampler, LowTemperatureSharpensHighFlattens) {
  const auto logits = log_probs({0.1, 0.2, 0.3, 0.4});
  SamplingParams p;
  p.temperature = 0.25f;  // p^4 normalised: 0.4^4 / sum = 0.67
  EXPECT_NEAR(frequencies(logits, p, 20000).at(3), 0.0256 / 0.0354, 0.015);
  p.temperature = 100.0f;
  EXPECT_NEAR(frequencies(logits, p, 20000).at(0), 0.25, 0.015);
}

TEST(Sampler, TopKTopPAndMinPRestrictTheCandidates) {
  const auto logits = log_probs({0.1, 0.2, 0.3, 0.4});
  SamplingParams p;
  p.top_k = 2;
  auto f = frequencies(logits, p, 20000);
  EXPECT_EQ(f.count(0) + f.count(1), 0u);
  EXPECT_NEAR(f.at(3), 0.4 / 0.7, 0.015);

  p = SamplingParams();
  p.top_p = 0.5f;  // 0.4 < 0.5 <= 0.4 + 0.3
  f = frequencies(logits, p, 20000);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f.at(2), 0.3 / 0.7, 0.015);

  p.top_p = 0.35f;
  f = frequencies(logits, p, 2000);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_EQ(f.count(3), 1u);

  p = SamplingParams();
  p.min_p = 0.6f;  // keeps p >= 0.24
  f = frequencies(logits, p, 20000);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f.at(3), 0.4 / 0.7, 0.015);

  p = SamplingParams();
  p.top_k = 1;
  f = frequencies(logits, p, 500);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_EQ(f.count(3), 1u);
}

TEST(Sampler, SameSeedSameTokenAndStepsDrawIndependently) {
  const std::vector<float> logits(64, 0.0f);  // uniform over 64 tokens
  Sampler sampler(64);
  SamplingParams p;
  std::vector<int32_t> output;
  std::vector<int32_t> first;
  for (int step = 0; step < 20; ++step) {
    auto row = logits;
    SamplingContext ctx{&p, {}, output, 1234, 0, {}};
    const int32_t t = sampler.sample(row, ctx, nullptr);
    row = logits;
    EXPECT_EQ(sampler.sample(row, ctx, nullptr), t) << "a draw depends only on seed and step";
    first.push_back(t);
    output.push_back(t);
  }
  std::sort(first.begin(), first.end());
  EXPECT_GT(std::unique(first.begin(), first.end()) - first.begin(), 10);
  // Another choice of the same request draws differently.
  auto row = logits;
  int32_t same = 0;
  for (int32_t c = 1; c <= 20; ++c) {
    row = logits;
    SamplingContext ctx{&p, {}, {}, 1234, c, {}};
    same += sampler.sample(row, ctx, nullptr) == first[0];
  }
  EXPECT_LT(same, 5);
}

TEST(Sampler, UniformDrawsCoverTheUnitInterval) {
  double lo = 1.0, hi = 0.0, sum = 0.0;
  for (int i = 0; i < 10000; ++i) {
    const double u = Sampler::uniform(99, 0, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
  }
  EXPECT_LT(lo, 0.001);
  EXPECT_GT(hi, 0.999);
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

TEST(Sampler, PenaltiesChangeTheLogitsAsSpecified) {
  Sampler sampler(6);
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  std::vector<float> row = {2.0f, -2.0f, 1.0f, 0.5f, 4.0f, 0.0f};
  const std::vector<int32_t> prompt = {0, 1, 0};
  const std::vector<int32_t> output = {2, 2, 4};
  SamplingContext ctx{&p, prompt, output, 0, 0, {}};
  sampler.sample(row, ctx, nullptr);
  EXPECT_FLOAT_EQ(row[0], 1.0f);                     // repetition: 2 / 2
  EXPECT_FLOAT_EQ(row[1], -4.0f);                    // repetition: -2 * 2
  EXPECT_FLOAT_EQ(row[2], 0.5f - 2 * 0.5f - 0.25f);  // repetition, then 2x frequency
  EXPECT_FLOAT_EQ(row[3], 0.5f);                     // unseen
  EXPECT_FLOAT_EQ(row[4], 2.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(row[5], 0.0f);
  // Scratch state is reset between calls: the same call again gives the same row.
  std::vector<float> again = {2.0f, -2.0f, 1.0f, 0.5f, 4.0f, 0.0f};
  sampler.sample(again, ctx, nullptr);
  EXPECT_EQ(row, again);
}

TEST(Sampler, LogitBiasShiftsTheListedTokens) {
  Sampler sampler(4);
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{3, -100.0f}, {0, 4.5f}};  // bans the argmax, lifts token 0 past token 1
  std::vector<float> row = {0.0f, 4.0f, 0.0f, 9.0f};
  SamplingContext ctx{&p, {}, {}, 1, 0, {}};
  EXPECT_EQ(sampler.sample(row, ctx, nullptr), 0);
  EXPECT_EQ(Sampler::candidates_needed(p, false), 0) << "a bias needs the whole row";
  // Sampling follows the biased distribution: +log(3) on token 1 of a uniform row triples it.
  p.temperature = 1.0f;
  p.logit_bias = {{1, static_cast<float>(std::log(3.0))}};
  const auto freq = frequencies(std::vector<float>(4, 0.0f), p, 20000);
  EXPECT_NEAR(freq.at(1), 0.5, 0.015);
  // The engine-side checks: range and duplicates.
  p.logit_bias = {{1, 100.5f}};
  EXPECT_FALSE(p.validate().ok());
  p.logit_bias = {{1, 1.0f}, {1, 2.0f}};
  EXPECT_FALSE(p.validate().ok());
}

TEST(Sampler, SuppressedTokensAreNeverDrawn) {
  Sampler sampler(4);
  SamplingParams p;
  const std::vector<int32_t> suppressed = {3, 1};
  for (float temperature : {0.0f, 1.0f}) {
    p.temperature = temperature;
    for (int s = 0; s < 500; ++s) {
      std::vector<float> row = {0.0f, 5.0f, 0.0f, 9.0f};
      SamplingContext ctx{&p, {}, {}, static_cast<uint64_t>(s), 0, suppressed};
      const int32_t t = sampler.sample(row, ctx, nullptr);
      ASSERT_TRUE(t == 0 || t == 2);
    }
  }
  std::vector<float> row = {1.0f, 2.0f};
  Sampler two(2);
  p.temperature = 1.0f;
  const std::vector<int32_t> all = {0, 1};
  SamplingContext ctx{&p, {}, {}, 0, 0, all};
  EXPECT_THROW(two.sample(row, ctx, nullptr), Error);
}

TEST(Sampler, LogprobsComeFromTheRawLogits) {
  Sampler sampler(5);
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 3.0f;  // changes the choice but not the reported logprobs
  p.logprobs = 3;
  const std::vector<float> raw = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  auto row = raw;
  const std::vector<int32_t> prompt = {1, 3};
  SamplingContext ctx{&p, prompt, {}, 0, 0, {}};
  TokenLogprob lp;
  const int32_t t = sampler.sample(row, ctx, &lp);
  EXPECT_EQ(t, 2);
  double z = 0.0;
  for (float l : raw) z += std::exp(l);
  EXPECT_EQ(lp.token_id, 2);
  EXPECT_NEAR(lp.logprob, 2.0 - std::log(z), 1e-5);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // tie with 3: lower id first
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 2);
  EXPECT_NEAR(lp.top[0].second, 3.0 - std::log(z), 1e-5);
  EXPECT_FLOAT_EQ(lp.top[2].second, lp.logprob);

  p.logprobs = 0;
  row = raw;
  sampler.sample(row, ctx, &lp);
  EXPECT_TRUE(lp.top.empty());
}

// The candidates a device computes (ops/top_k_logits.h), built here from the row: the k best ids
// (equal logits by lower id) and the log-sum-exp.
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<float> logits;
  float log_sum_exp = 0.0f;
  LogitsView view() const { return LogitsView{{}, ids, logits, log_sum_exp}; }
};

Candidates candidates_of(const std::vector<float>& row, size_t k) {
  Candidates c;
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  ids.resize(k);
  c.ids = ids;
  for (int32_t id : ids) c.logits.push_back(row[static_cast<size_t>(id)]);
  const float max = c.logits[0];
  double sum = 0.0;
  for (float l : row) sum += std::exp(static_cast<double>(l) - max);
  c.log_sum_exp = static_cast<float>(max + std::log(sum));
  return c;
}

TEST(Sampler, CandidatesGiveTheTokensAndLogprobsOfWholeRows) {
  std::mt19937 rng(5);
  constexpr int64_t kVocab = 301;
  Sampler whole(kVocab), from_candidates(kVocab);
  std::vector<SamplingParams> grid;
  for (float t : {0.0f, 0.5f, 1.0f, 1.7f}) {
    for (int32_t top_k : {1, 3, 17, 64}) {
      for (float top_p : {1.0f, 0.6f}) {
        for (float min_p : {0.0f, 0.2f}) {
          SamplingParams p;
          p.temperature = t;
          p.top_k = t == 0.0f ? 0 : top_k;
          p.top_p = top_p;
          p.min_p = min_p;
          p.logprobs = top_k % 2 == 1 ? 4 : 0;
          grid.push_back(p);
        }
      }
    }
  }
  int compared = 0;
  for (int row_index = 0; row_index < 40; ++row_index) {
    // Coarse values: many exact ties, a few -inf.
    std::vector<float> row(kVocab);
    std::uniform_int_distribution<int> level(-40, 40);
    for (float& l : row) l = static_cast<float>(level(rng)) * 0.25f;
    for (int i = 0; i < 5; ++i) row[rng() % kVocab] = -INFINITY;
    for (const SamplingParams& p : grid) {
      const int32_t need = Sampler::candidates_needed(p, false);
      ASSERT_GT(need, 0);
      const Candidates c = candidates_of(row, static_cast<size_t>(need) + row_index % 3);
      for (int32_t step = 0; step < 3; ++step) {
        const std::vector<int32_t> output(static_cast<size_t>(step), 7);
        SamplingContext ctx{&p, {}, output, 1000u + static_cast<uint64_t>(row_index), 0, {}};
        auto copy = row;
        TokenLogprob want, got;
        const int32_t a = whole.sample(std::span<float>(copy), ctx, &want);
        const int32_t b = from_candidates.sample(c.view(), ctx, &got);
        ASSERT_EQ(a, b) << "row " << row_index << " T " << p.temperature << " top_k " << p.top_k
                        << " top_p " << p.top_p << " min_p " << p.min_p;
        if (p.logprobs) {
          EXPECT_EQ(got.token_id, want.token_id);
          EXPECT_NEAR(got.logprob, want.logprob, 1e-5);
          ASSERT_EQ(got.top.size(), want.top.size());
          for (size_t j = 0; j < got.top.size(); ++j) {
            EXPECT_EQ(got.top[j].first, want.top[j].first);
            EXPECT_NEAR(got.top[j].second, want.top[j].second, 1e-5);
          }
        }
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 40 * 3 * static_cast<int>(grid.size()));
}

TEST(Sampler, CandidatesAreNeededOnlyWhereTheyDecide) {
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(Sampler::candidates_needed(p, false), 1);
  p.logprobs = 5;
  EXPECT_EQ(Sampler::candidates_needed(p, false), 5);
  EXPECT_EQ(Sampler::candidates_needed(p, true), 0) << "suppressed stop tokens need the row";
  p = SamplingParams();
  EXPECT_EQ(Sampler::candidates_needed(p, false), 0) << "sampling over the whole vocabulary";
  p.top_k = 40;
  EXPECT_EQ(Sampler::candidates_needed(p, false), 40);
  p.repetition_penalty = 1.1f;
  EXPECT_EQ(Sampler::candidates_needed(p, false), 0);
}

}  // namespace
}  // namespace inflight
