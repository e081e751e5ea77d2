// Expected values come from numpy 2.x (np.mean, np.std, np.median, np.percentile).
#include "bench/stats.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/check.h"

namespace inflight::bench {
namespace {

const std::vector<double> kSample = {3, 1, 4, 1, 5, 9, 2, 6};

TEST(Stats, MatchesNumpy) {
  EXPECT_DOUBLE_EQ(mean(kSample), 3.875);
  EXPECT_DOUBLE_EQ(stddev(kSample), 2.5708704751503917);
  EXPECT_DOUBLE_EQ(median(kSample), 3.5);
  EXPECT_DOUBLE_EQ(percentile(kSample, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(kSample, 25), 1.75);
  EXPECT_DOUBLE_EQ(percentile(kSample, 90), 6.8999999999999995);
  EXPECT_DOUBLE_EQ(percentile(kSample, 99), 8.79);
  EXPECT_DOUBLE_EQ(percentile(kSample, 99.9), 8.979000000000001);
  EXPECT_DOUBLE_EQ(percentile(kSample, 100), 9.0);
}

TEST(Stats, EmptyAndSingleSamples) {
  const std::vector<double> empty;
  EXPECT_EQ(mean(empty), 0.0);
  EXPECT_EQ(stddev(empty), 0.0);
  EXPECT_EQ(percentile(empty, 99), 0.0);
  const std::vector<double> one = {7.0};
  EXPECT_EQ(percentile(one, 99), 7.0);
  EXPECT_EQ(stddev(one), 0.0);
}

TEST(Stats, SummarizeScalesAndKeepsPercentileOrder) {
  const std::vector<double> ps = {99, 50};
  const Summary s = summarize(kSample, ps, 1000.0);
  EXPECT_DOUBLE_EQ(s.mean, 3875.0);
  EXPECT_DOUBLE_EQ(s.median, 3500.0);
  ASSERT_EQ(s.percentiles.size(), 2u);
  EXPECT_EQ(s.percentiles[0].first, 99);
  EXPECT_NEAR(s.percentiles[0].second, 8790.0, 1e-9);
  EXPECT_EQ(s.percentiles[1].first, 50);
}

TEST(Stats, RejectsPercentilesOutOfRange) {
  EXPECT_THROW(percentile(kSample, 101), Error);
  EXPECT_THROW(percentile(kSample, -1), Error);
}

}  // namespace
}  // namespace inflight::bench
