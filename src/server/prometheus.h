// PrometheusText: writes metric families in the Prometheus text exposition format (0.0.4),
// which `promtool check metrics` accepts:
//
//   # HELP inflight_prompt_tokens_total Prompt tokens processed.
//   # TYPE inflight_prompt_tokens_total counter
//   inflight_prompt_tokens_total{model_name="smollm"} 42
//
// Counter names get the `_total` suffix; histograms write cumulative `_bucket{le=...}` lines
// ending with le="+Inf", then `_sum` and `_count`. Every sample carries the constant labels
// given at construction; the labelled_* forms write one sample (or one histogram) per label set,
// as a server of several models labels each model's with model_name (vLLM's label).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "inflight/stats.h"

namespace inflight::server {

using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

class PrometheusText {
 public:
  explicit PrometheusText(PrometheusLabels constant_labels = {});

  // `name` without `_total`.
  void counter(std::string_view name, std::string_view help, double value);
  // One family, one sample per label set (e.g. finished_reason="stop").
  void labelled_counter(std::string_view name, std::string_view help,
                        const std::vector<std::pair<PrometheusLabels, double>>& samples);
  void gauge(std::string_view name, std::string_view help, double value);
  void labelled_gauge(std::string_view name, std::string_view help,
                      const std::vector<std::pair<PrometheusLabels, double>>& samples);
  void histogram(std::string_view name, std::string_view help, const Histogram& h);
  void labelled_histogram(std::string_view name, std::string_view help,
                          const std::vector<std::pair<PrometheusLabels, const Histogram*>>& series);

  const std::string& text() const { return text_; }

 private:
  void header(std::string_view name, std::string_view help, std::string_view type);
  void sample(std::string_view name, const PrometheusLabels& extra, double value);

  std::string labels_;  // rendered constant labels: `a="x",b="y"` (no braces)
  std::string text_;
};

// Prometheus' spelling of a sample value: shortest round-trip decimal, +Inf, -Inf, NaN.
std::string prometheus_number(double value);
// A label value with \\, \" and \n escaped.
std::string prometheus_escape_label(std::string_view value);

}  // namespace inflight::server
