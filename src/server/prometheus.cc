#include "server/prometheus.h"

#include <fmt/format.h>

#include <cmath>

namespace inflight::server {

std::string prometheus_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

std::string prometheus_escape_label(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char ch : value) {
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '"') {
      out += "\\\"";
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
    }
  }
  return out;
}

namespace {

std::string escape_help(std::string_view help) {
  std::string out;
  for (char ch : help) {
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
    }
  }
  return out;
}

std::string render_labels(const PrometheusLabels& labels) {
  std::string out;
  for (const auto& [k, v] : labels) {
    if (!out.empty()) out += ',';
    out += fmt::format("{}=\"{}\"", k, prometheus_escape_label(v));
  }
  return out;
}

}  // namespace

PrometheusText::PrometheusText(PrometheusLabels constant_labels)
    : labels_(render_labels(constant_labels)) {}

void PrometheusText::header(std::string_view name, std::string_view help, std::string_view type) {
  text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escape_help(help), name, type);
}

void PrometheusText::sample(std::string_view name, const PrometheusLabels& extra, double value) {
  std::string labels = labels_;
  std::string more = render_labels(extra);
  if (!more.empty()) labels += (labels.empty() ? "" : ",") + more;
  if (labels.empty()) {
    text_ += fmt::format("{} {}\n", name, prometheus_number(value));
  } else {
    text_ += fmt::format("{}{{{}}} {}\n", name, labels, prometheus_number(value));
  }
}

void PrometheusText::counter(std::string_view name, std::string_view help, double value) {
  std::string full = std::string(name) + "_total";
  header(full, help, "counter");
  sample(full, {}, value);
}

void PrometheusText::labelled_counter(
    std::string_view name, std::string_view help,
    const std::vector<std::pair<PrometheusLabels, double>>& samples) {
  std::string full = std::string(name) + "_total";
  header(full, help, "counter");
  for (const auto& [labels, value] : samples) sample(full, labels, value);
}

void PrometheusText::gauge(std::string_view name, std::string_view help, double value) {
  labelled_gauge(name, help, {{{}, value}});
}

void PrometheusText::labelled_gauge(
    std::string_view name, std::string_view help,
    const std::vector<std::pair<PrometheusLabels, double>>& samples) {
  header(name, help, "gauge");
  for (const auto& [labels, value] : samples) sample(name, labels, value);
}

void PrometheusText::histogram(std::string_view name, std::string_view help, const Histogram& h) {
  labelled_histogram(name, help, {{{}, &h}});
}

void PrometheusText::labelled_histogram(
    std::string_view name, std::string_view help,
    const std::vector<std::pair<PrometheusLabels, const Histogram*>>& series) {
  header(name, help, "histogram");
  const std::string bucket = std::string(name) + "_bucket";
  for (const auto& entry : series) {
    const PrometheusLabels& labels = entry.first;
    const Histogram* h = entry.second;
    auto with = [&labels](PrometheusLabels more) {
      more.insert(more.begin(), labels.begin(), labels.end());
      return more;
    };
    for (size_t i = 0; i < h->bounds.size(); ++i) {
      sample(bucket, with({{"le", prometheus_number(h->bounds[i])}}),
             static_cast<double>(h->cumulative(i)));
    }
    sample(bucket, with({{"le", "+Inf"}}), static_cast<double>(h->count));
    sample(std::string(name) + "_sum", labels, h->sum);
    sample(std::string(name) + "_count", labels, static_cast<double>(h->count));
  }
}

}  // namespace inflight::server
