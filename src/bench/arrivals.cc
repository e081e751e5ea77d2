#include "bench/arrivals.h"

#include <cmath>
#include <random>

#include "core/check.h"

namespace inflight::bench {

std::vector<double> arrival_times(int32_t num_requests, double rate, double burstiness,
                                  uint64_t seed) {
  INFLIGHT_CHECK_CODE(num_requests >= 0, ErrorCode::kInvalidArgument,
                      "number of requests must be >= 0, got {}", num_requests);
  INFLIGHT_CHECK_CODE(rate > 0.0, ErrorCode::kInvalidArgument,
                      "request rate must be > 0 (or inf), got {}", rate);
  INFLIGHT_CHECK_CODE(burstiness > 0.0 && std::isfinite(burstiness), ErrorCode::kInvalidArgument,
                      "burstiness must be a positive number, got {}", burstiness);
  std::vector<double> times(num_requests, 0.0);
  if (std::isinf(rate) || num_requests == 0) return times;
  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  double t = 0.0;
  for (auto& time : times) {
    t += gap(rng);
    time = t;
  }
  if (t > 0.0) {
    const double scale = num_requests / rate / t;
    for (auto& time : times) time *= scale;
  }
  return times;
}

}  // namespace inflight::bench
