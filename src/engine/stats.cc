#include "inflight/stats.h"

#include <algorithm>
#include <utility>

namespace inflight {
namespace {

// Bucket bounds (seconds), as vLLM's Prometheus metrics use them.
const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                         0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                         20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBounds = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                        0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestBounds = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                            5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                            60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto it = std::lower_bound(bounds.begin(), bounds.end(), value);  // first bound >= value
  ++counts[static_cast<size_t>(it - bounds.begin())];
  sum += value;
  ++count;
}

uint64_t Histogram::cumulative(size_t i) const {
  uint64_t c = 0;
  for (size_t j = 0; j <= i && j < counts.size(); ++j) c += counts[j];
  return c;
}

EngineStats::EngineStats()
    : queue_time(kRequestBounds),
      time_to_first_token(kTtftBounds),
      inter_token_latency(kItlBounds),
      e2e_latency(kRequestBounds),
      step_time(kTtftBounds) {}

}  // namespace inflight
