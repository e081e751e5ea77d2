#include "bench/stats.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace inflight::bench {
namespace {

double percentile_of_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

}  // namespace

double mean(std::span<const double> xs) {
  if (xs.empty()) return 0.0;
  double sum = 0.0;
  for (double x : xs) sum += x;
  return sum / static_cast<double>(xs.size());
}

double stddev(std::span<const double> xs) {
  if (xs.empty()) return 0.0;
  const double m = mean(xs);
  double sq = 0.0;
  for (double x : xs) sq += (x - m) * (x - m);
  return std::sqrt(sq / static_cast<double>(xs.size()));
}

double percentile(std::span<const double> xs, double p) {
  INFLIGHT_CHECK_CODE(p >= 0.0 && p <= 100.0, ErrorCode::kInvalidArgument,
                      "percentile must be in [0, 100], got {}", p);
  std::vector<double> sorted(xs.begin(), xs.end());
  std::sort(sorted.begin(), sorted.end());
  return percentile_of_sorted(sorted, p);
}

double median(std::span<const double> xs) {
  return percentile(xs, 50.0);
}

Summary summarize(std::span<const double> xs, std::span<const double> percentiles, double scale) {
  std::vector<double> sorted(xs.begin(), xs.end());
  std::sort(sorted.begin(), sorted.end());
  Summary s;
  s.mean = mean(xs) * scale;
  s.std = stddev(xs) * scale;
  s.median = percentile_of_sorted(sorted, 50.0) * scale;
  for (double p : percentiles) {
    INFLIGHT_CHECK_CODE(p >= 0.0 && p <= 100.0, ErrorCode::kInvalidArgument,
                        "percentile must be in [0, 100], got {}", p);
    s.percentiles.emplace_back(p, percentile_of_sorted(sorted, p) * scale);
  }
  return s;
}

}  // namespace inflight::bench
