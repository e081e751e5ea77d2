// When each request of a serving benchmark is sent, relative to the start of the run.
//
// Gaps between requests are drawn from Gamma(shape = burstiness, scale = 1 / (rate *
// burstiness)): mean gap 1/rate whatever the burstiness; burstiness 1 is a Poisson process,
// smaller is burstier, larger is more regular. The gaps are summed (the first request waits
// one gap too) and the sums rescaled so that the last request is sent at exactly
// num_requests / rate: runs with different seeds then offer the same average rate, instead of
// one that wanders by a few percent. A rate of infinity sends every request at time 0.
#pragma once

#include <cstdint>
#include <vector>

namespace inflight::bench {

// Seconds from the start of the run; non-decreasing. rate > 0 (may be +inf), burstiness > 0.
std::vector<double> arrival_times(int32_t num_requests, double rate, double burstiness,
                                  uint64_t seed);

}  // namespace inflight::bench
