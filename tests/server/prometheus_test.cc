#include "server/prometheus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "server/metrics.h"
#include "test_data.h"

namespace inflight::server {
namespace {

TEST(PrometheusText, CounterGaugeAndLabels) {
  PrometheusText p(PrometheusLabels{{"model_name", "m\"1\\x\n"}});
  p.counter("inflight_prompt_tokens", "Prompt tokens.", 42);
  p.gauge("inflight_kv_cache_usage_perc", "Usage.", 0.25);
  EXPECT_EQ(p.text(),
            "# HELP inflight_prompt_tokens_total Prompt tokens.\n"
            "# TYPE inflight_prompt_tokens_total counter\n"
            "inflight_prompt_tokens_total{model_name=\"m\\\"1\\\\x\\n\"} 42\n"
            "# HELP inflight_kv_cache_usage_perc Usage.\n"
            "# TYPE inflight_kv_cache_usage_perc gauge\n"
            "inflight_kv_cache_usage_perc{model_name=\"m\\\"1\\\\x\\n\"} 0.25\n");
}

TEST(PrometheusText, HistogramIsCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(0.7);
  h.observe(5.0);
  PrometheusText p;
  p.histogram("x_seconds", "X.", h);
  EXPECT_EQ(p.text(),
            "# HELP x_seconds X.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"0.1\"} 1\n"
            "x_seconds_bucket{le=\"1\"} 3\n"
            "x_seconds_bucket{le=\"+Inf\"} 4\n"
            "x_seconds_sum 6.25\n"
            "x_seconds_count 4\n");
}

TEST(PrometheusText, Numbers) {
  EXPECT_EQ(prometheus_number(1.0), "1");
  EXPECT_EQ(prometheus_number(0.001), "0.001");
  EXPECT_EQ(prometheus_number(INFINITY), "+Inf");
  EXPECT_EQ(prometheus_number(-INFINITY), "-Inf");
  EXPECT_EQ(prometheus_number(NAN), "NaN");
}

ModelMetrics named(const std::string& name) {
  ModelMetrics m;
  m.name = name;
  return m;
}

// The whole /metrics body, checked by the real promtool when it is installed.
TEST(Metrics, PromtoolAcceptsRenderedMetrics) {
  ModelMetrics model;
  model.name = "smollm \"test\"";
  EngineStats& stats = model.engine;
  stats.num_running = 3;
  stats.num_kv_blocks = 100;
  stats.num_free_kv_blocks = 90;
  stats.kv_usage = 0.1;
  stats.time_to_first_token.observe(0.02);
  stats.e2e_latency.observe(1.5);
  // A second model: each family holds one sample (or histogram) per model.
  ModelMetrics other;
  other.name = "tiny";
  other.engine.num_running = 1;
  other.engine.e2e_latency.observe(0.25);
  other.tokens_sent = 7;
  HttpServerStats http;
  http.io_cpu_seconds = 0.125;
  std::string text = render_metrics({model, other}, http, "inflight_");
  EXPECT_NE(text.find("inflight_num_requests_running{model_name=\"smollm \\\"test\\\"\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("inflight_kv_cache_used_blocks{"), std::string::npos);
  EXPECT_NE(text.find("inflight_num_requests_running{model_name=\"tiny\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("inflight_e2e_request_latency_seconds_count{model_name=\"tiny\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("inflight_http_streamed_tokens_total{model_name=\"tiny\"} 7\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ninflight_http_io_cpu_seconds_total 0.125\n"), std::string::npos);
  // One HELP line per family, whatever the number of models.
  size_t helps = 0;
  for (size_t at = 0;
       (at = text.find("# HELP inflight_num_requests_running ", at)) != std::string::npos; ++at) {
    ++helps;
  }
  EXPECT_EQ(helps, 1u);
  EXPECT_NE(text.find("inflight_request_success_total{model_name=\"smollm \\\"test\\\"\","
                      "finished_reason=\"stop\"} 0\n"),
            std::string::npos);
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed";
  }
  auto dir = inflight::testing::scratch_dir("prometheus_test");
  auto file = dir / "metrics.txt";
  std::ofstream(file) << text;
  std::string cmd = "promtool check metrics < " + file.string() + " > " +
                    (dir / "promtool.out").string() + " 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream out(dir / "promtool.out");
  std::string report((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << report;
  // Also without a model (all unloaded), and a model still loading (zeros).
  std::ofstream(file) << render_metrics({}, http, "inflight_");
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::ofstream(file) << render_metrics({named("loading")}, http, "inflight_");
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

TEST(Metrics, PrefixIsConfigurable) {
  std::string text = render_metrics({named("m")}, HttpServerStats{}, "inflight:");
  EXPECT_NE(text.find("\ninflight:num_requests_running{model_name=\"m\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE inflight:time_to_first_token_seconds histogram\n"),
            std::string::npos);
  EXPECT_EQ(text.find("inflight_"), std::string::npos);
  // promtool parses it; its only findings are the colon convention, one per metric family.
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed";
  }
  const auto dir = inflight::testing::scratch_dir("prometheus_colon_test");
  std::ofstream(dir / "metrics.txt") << text;
  const std::string cmd = "promtool check metrics < " + (dir / "metrics.txt").string() + " > " +
                          (dir / "promtool.out").string() + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  std::ifstream out(dir / "promtool.out");
  int findings = 0;
  for (std::string line; std::getline(out, line);) {
    EXPECT_NE(line.find("metric names should not contain ':'"), std::string::npos) << line;
    ++findings;
  }
  EXPECT_GT(findings, 10);
}

}  // namespace
}  // namespace inflight::server
