#include "bench/report.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_data.h"

namespace inflight::bench {
namespace {

struct Fixture {
  ServeBenchRun run;
  ServeBenchOptions options;
  ServeReportContext context;
  BenchmarkMetrics metrics;
  RunInfo info{"2025-01-01T00:00:00Z", "test device", "abc", "inflight bench serve"};

  Fixture() {
    RequestRecord r;
    r.state = RequestRecord::State::kDone;
    r.success = true;
    r.prompt_len = 3;
    r.ttft = 0.1;
    r.latency = 0.3;
    r.itl = {0.2};
    r.output_tokens = 2;
    r.generated_text = "ab";
    run.records = {r};
    run.duration = 2.0;
    run.client_cpu_seconds = 0.01;
    options.model = "m";
    options.max_concurrency = 8;
    context.dataset_name = "random";
    context.percentiles = {50, 99.9};
    context.goodput.ttft_ms = 100.0;
    metrics = compute_metrics(run.records, run.duration, context.percentiles, context.goodput);
  }
};

TEST(Report, JsonUsesVllmFieldNames) {
  Fixture f;
  const auto j = serve_result_json(f.metrics, f.run, f.options, f.context, f.info);
  for (const char* key : {"duration",
                          "completed",
                          "failed",
                          "total_input_tokens",
                          "total_output_tokens",
                          "request_throughput",
                          "request_goodput",
                          "output_throughput",
                          "total_token_throughput",
                          "max_output_tokens_per_s",
                          "max_concurrent_requests",
                          "mean_ttft_ms",
                          "median_ttft_ms",
                          "std_ttft_ms",
                          "p50_ttft_ms",
                          "p99.9_ttft_ms",
                          "mean_tpot_ms",
                          "median_tpot_ms",
                          "p99.9_itl_ms",
                          "mean_e2el_ms",
                          "device",
                          "model",
                          "commit",
                          "command",
                          "date"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_EQ(j["max_concurrency"], 8);
  EXPECT_EQ(j["completed"], 1);
  EXPECT_DOUBLE_EQ(j["request_goodput"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["client_cpu_ms_per_request"].get<double>(), 10.0);
  EXPECT_FALSE(j.contains("itls"));
  f.context.save_detailed = true;
  const auto detailed = serve_result_json(f.metrics, f.run, f.options, f.context, f.info);
  EXPECT_EQ(detailed["output_lens"], nlohmann::json::array({2}));
  EXPECT_EQ(detailed["generated_texts"][0], "ab");
}

TEST(Report, PercentileKeys) {
  EXPECT_EQ(percentile_key(99), "p99");
  EXPECT_EQ(percentile_key(99.9), "p99.9");
  EXPECT_EQ(percentile_key(50), "p50");
}

TEST(Report, TableHasVllmLabels) {
  Fixture f;
  const auto dir = inflight::testing::scratch_dir("bench_report");
  const std::string path = (dir / "table.txt").string();
  std::FILE* out = std::fopen(path.c_str(), "w");
  ASSERT_NE(out, nullptr);
  print_serve_table(out, f.metrics, f.run, f.options, f.context);
  std::fclose(out);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* label : {"Serving Benchmark Result", "Successful requests:", "Failed requests:",
                            "Request goodput (req/s):", "Mean TTFT (ms):", "P99.9 ITL (ms):",
                            "Time per Output Token (excl. 1st token)", "Client CPU time (s):"}) {
    EXPECT_NE(text.find(label), std::string::npos) << label;
  }
}

TEST(Report, WritesJsonFiles) {
  const auto dir = inflight::testing::scratch_dir("bench_report_json");
  const std::string path = (dir / "sub" / "r.json").string();
  write_json_file(path, nlohmann::json{{"a", 1}});
  std::ifstream in(path);
  EXPECT_EQ(nlohmann::json::parse(in)["a"], 1);
}

}  // namespace
}  // namespace inflight::bench
