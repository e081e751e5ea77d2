// Summary statistics with numpy's conventions, so that figures compare one to one with other
// benchmark tools (vLLM's `bench serve` computes them with numpy):
//   mean, std (population: divides by n), median, percentile with linear interpolation
//   between the closest ranks (numpy's default method), and 0 for an empty sample.
#pragma once

#include <span>
#include <utility>
#include <vector>

namespace inflight::bench {

double mean(std::span<const double> xs);
// Population standard deviation (numpy's ddof=0).
double stddev(std::span<const double> xs);
// p in [0, 100]. Rank r = p/100 * (n - 1); the value at r interpolates linearly between the
// sorted samples at floor(r) and ceil(r).
double percentile(std::span<const double> xs, double p);
double median(std::span<const double> xs);

// One distribution as the reports show it; values are in the unit of the samples times `scale`.
struct Summary {
  double mean = 0.0;
  double median = 0.0;
  double std = 0.0;
  std::vector<std::pair<double, double>> percentiles;  // (p, value)
};

Summary summarize(std::span<const double> xs, std::span<const double> percentiles,
                  double scale = 1.0);

}  // namespace inflight::bench
