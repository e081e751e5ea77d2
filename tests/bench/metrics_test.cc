// Aggregation over hand-made records; expected values from numpy (see stats_test.cc).
#include "bench/metrics.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace inflight::bench {
namespace {

RequestRecord done(double start, double ttft, std::vector<double> itl, int32_t output_tokens,
                   int32_t prompt_len = 10) {
  RequestRecord r;
  r.state = RequestRecord::State::kDone;
  r.success = true;
  r.prompt_len = prompt_len;
  r.start_time = start;
  r.ttft = ttft;
  r.latency = ttft;
  for (double gap : itl) r.latency += gap;
  r.itl = std::move(itl);
  r.output_tokens = output_tokens;
  r.num_token_chunks = static_cast<int32_t>(r.itl.size()) + 1;
  r.generated_text = std::string(static_cast<size_t>(r.num_token_chunks), 'x');
  return r;
}

RequestRecord failed() {
  RequestRecord r;
  r.state = RequestRecord::State::kDone;
  r.prompt_len = 1000;
  r.error = "HTTP 500";
  return r;
}

TEST(Metrics, AggregatesLikeVllm) {
  std::vector<RequestRecord> records = {
      done(0.0, 0.5, {0.25, 0.25}, 5),     // TPOT (1.0 - 0.5) / 4 = 0.125
      failed(), done(1.0, 1.0, {0.5}, 2),  // TPOT 0.5
      done(2.0, 0.25, {}, 1),              // one token: no TPOT sample, TPOT 0 for goodput
  };
  RequestRecord in_flight;
  in_flight.state = RequestRecord::State::kInFlight;
  records.push_back(in_flight);
  const std::vector<double> ps = {50, 99};
  const auto m = compute_metrics(records, 4.0, ps, GoodputSlo{});
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.not_finished, 1);
  EXPECT_EQ(m.total_input, 30);  // failed requests' prompts are not counted
  EXPECT_EQ(m.total_output, 8);
  EXPECT_EQ(m.output_lens, (std::vector<int32_t>{5, 0, 2, 1, 0}));
  EXPECT_DOUBLE_EQ(m.request_throughput, 0.75);
  EXPECT_DOUBLE_EQ(m.output_throughput, 2.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 9.5);
  EXPECT_FALSE(m.request_goodput.has_value());
  // ttft [0.5, 1.0, 0.25] s
  EXPECT_DOUBLE_EQ(m.ttft_ms.mean, 583.3333333333334);
  EXPECT_DOUBLE_EQ(m.ttft_ms.median, 500.0);
  EXPECT_NEAR(m.ttft_ms.std, 311.8047822311618, 1e-9);
  EXPECT_NEAR(m.ttft_ms.percentiles[1].second, 990.0, 1e-9);
  // tpot [0.125, 0.5] s
  EXPECT_DOUBLE_EQ(m.tpot_ms.mean, 312.5);
  EXPECT_NEAR(m.tpot_ms.percentiles[1].second, 496.25, 1e-9);
  // itl pooled [0.25, 0.25, 0.5]
  EXPECT_NEAR(m.itl_ms.mean, 333.3333333333333, 1e-9);
  EXPECT_DOUBLE_EQ(m.itl_ms.median, 250.0);
  // e2el [1.0, 1.5, 0.25]
  EXPECT_DOUBLE_EQ(m.e2el_ms.median, 1000.0);
  // 1-second buckets from t=0: token chunks 0.5 0.75 | 1.0 | 2.0 2.25 2.5 -> [2, 1, 3, 0].
  EXPECT_EQ(m.max_output_tokens_per_s, 3.0);
  EXPECT_EQ(m.max_concurrent_requests, 2);
}

TEST(Metrics, Goodput) {
  const std::vector<RequestRecord> records = {
      done(0.0, 0.5, {0.25, 0.25}, 5),  // ttft 500, tpot 125, e2el 1000
      done(1.0, 1.0, {0.5}, 2),         // ttft 1000, tpot 500, e2el 1500
      done(2.0, 0.25, {}, 1),           // ttft 250, tpot 0, e2el 250
  };
  const std::vector<double> ps = {99};
  auto good = [&](const std::string& spec) {
    return *compute_metrics(records, 2.0, ps, parse_goodput(spec)).request_goodput * 2.0;
  };
  EXPECT_DOUBLE_EQ(good("ttft:600"), 2.0);
  EXPECT_DOUBLE_EQ(good("ttft:1000"), 3.0);  // <= the SLO is good
  EXPECT_DOUBLE_EQ(good("tpot:100"), 1.0);
  EXPECT_DOUBLE_EQ(good("ttft:600,tpot:200,e2el:900"), 1.0);
  EXPECT_DOUBLE_EQ(good("ttft:600 e2el:2000"), 2.0);
}

TEST(Metrics, MissingUsageFallsBackToTokenizerOrChunks) {
  std::vector<RequestRecord> records = {done(0.0, 0.5, {0.25, 0.25}, -1)};
  const std::vector<double> ps = {99};
  auto chunks = compute_metrics(records, 1.0, ps, {});
  EXPECT_EQ(chunks.total_output, 3);
  EXPECT_EQ(chunks.num_without_usage, 1);
  EXPECT_DOUBLE_EQ(chunks.tpot_ms.mean, 250.0);
  auto counted = compute_metrics(records, 1.0, ps, {},
                                 [](const std::string& text) { return int32_t(text.size() * 2); });
  EXPECT_EQ(counted.total_output, 6);
  EXPECT_DOUBLE_EQ(counted.tpot_ms.mean, 100.0);
}

TEST(Metrics, NothingCompleted) {
  const std::vector<RequestRecord> records = {failed()};
  const std::vector<double> ps = {99};
  const auto m = compute_metrics(records, 1.0, ps, parse_goodput("ttft:1"));
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.ttft_ms.mean, 0.0);
  EXPECT_EQ(m.ttft_ms.percentiles[0].second, 0.0);
  EXPECT_EQ(*m.request_goodput, 0.0);
  EXPECT_EQ(m.max_output_tokens_per_s, 0.0);
}

TEST(Metrics, ParsesOptions) {
  const auto slo = parse_goodput("ttft:500,tpot:50.5,e2el:3000");
  EXPECT_EQ(*slo.ttft_ms, 500.0);
  EXPECT_EQ(*slo.tpot_ms, 50.5);
  EXPECT_EQ(*slo.e2el_ms, 3000.0);
  EXPECT_TRUE(parse_goodput("").empty());
  EXPECT_THROW(parse_goodput("itl:5"), Error);
  EXPECT_THROW(parse_goodput("ttft"), Error);
  EXPECT_THROW(parse_goodput("ttft:-1"), Error);
  EXPECT_THROW(parse_goodput("ttft:abc"), Error);
  EXPECT_EQ(parse_percentiles("50,90,99.9"), (std::vector<double>{50, 90, 99.9}));
  EXPECT_THROW(parse_percentiles("101"), Error);
}

}  // namespace
}  // namespace inflight::bench
