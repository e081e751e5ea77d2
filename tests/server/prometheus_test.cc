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

// The whole /metrics body, checked by the real promtool when it is installed.
TEST(Metrics, PromtoolAcceptsRenderedMetrics) {
  frontend::Frontend fe(frontend::FrontendOptions{"smollm \"test\"", 8});
  EngineStats stats;
  stats.num_running = 3;
  stats.num_kv_blocks = 100;
  stats.num_free_kv_blocks = 90;
  stats.kv_usage = 0.1;
  stats.time_to_first_token.observe(0.02);
  stats.e2e_latency.observe(1.5);
  HttpServerStats http;
  http.io_cpu_seconds = 0.125;
  std::string text = render_metrics(&stats, http, fe, "inflight_");
  EXPECT_NE(text.find("inflight_num_requests_running{model_name=\"smollm \\\"test\\\"\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("inflight_kv_cache_used_blocks{"), std::string::npos);
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
  // Also without an engine (while the model loads).
  std::ofstream(file) << render_metrics(nullptr, http, fe, "inflight_");
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

TEST(Metrics, PrefixIsConfigurable) {
  frontend::Frontend fe(frontend::FrontendOptions{"m", 8});
  std::string text = render_metrics(nullptr, HttpServerStats{}, fe, "inflight:");
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
