#include "bench/arrivals.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "bench/stats.h"
#include "core/check.h"

namespace inflight::bench {
namespace {

std::vector<double> gaps(const std::vector<double>& times) {
  std::vector<double> out;
  double prev = 0.0;
  for (double t : times) {
    out.push_back(t - prev);
    prev = t;
  }
  return out;
}

TEST(Arrivals, InfiniteRateSendsEverythingAtOnce) {
  const auto t = arrival_times(5, INFINITY, 1.0, 0);
  EXPECT_EQ(t, std::vector<double>(5, 0.0));
}

TEST(Arrivals, LastArrivalIsAtNOverRate) {
  for (double burstiness : {0.1, 1.0, 4.0}) {
    const auto t = arrival_times(1000, 20.0, burstiness, 7);
    ASSERT_EQ(t.size(), 1000u);
    EXPECT_NEAR(t.back(), 50.0, 1e-9);
    EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
    EXPECT_GT(t.front(), 0.0);  // the first request waits one gap too
  }
}

TEST(Arrivals, SeededAndDeterministic) {
  EXPECT_EQ(arrival_times(100, 3.0, 1.0, 42), arrival_times(100, 3.0, 1.0, 42));
  EXPECT_NE(arrival_times(100, 3.0, 1.0, 42), arrival_times(100, 3.0, 1.0, 43));
}

TEST(Arrivals, BurstinessShapesTheGaps) {
  // Gamma(k, 1/(r k)) gaps have mean 1/r and coefficient of variation 1/sqrt(k).
  const double rate = 10.0;
  for (double k : {0.25, 1.0, 4.0}) {
    const auto g = gaps(arrival_times(20000, rate, k, 1));
    const double cv = stddev(g) / mean(g);
    EXPECT_NEAR(mean(g), 1.0 / rate, 1e-12);  // exact after the rescaling
    EXPECT_NEAR(cv, 1.0 / std::sqrt(k), 0.05 / std::sqrt(k)) << "burstiness " << k;
  }
}

TEST(Arrivals, RejectsBadArguments) {
  EXPECT_THROW(arrival_times(10, 0.0, 1.0, 0), Error);
  EXPECT_THROW(arrival_times(10, 1.0, 0.0, 0), Error);
  EXPECT_THROW(arrival_times(-1, 1.0, 1.0, 0), Error);
  EXPECT_TRUE(arrival_times(0, 1.0, 1.0, 0).empty());
}

}  // namespace
}  // namespace inflight::bench
