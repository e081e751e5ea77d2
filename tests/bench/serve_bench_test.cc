// `bench serve` end to end against a scripted SSE server. The client's clock is a tape of
// times: the client reads its clock once when the run starts, once when each request starts,
// once per SSE event and once when the run ends (the contract in sse_client.h and
// serve_bench.h), and requests run one at a time, so every timing is known exactly.
#include "bench/serve_bench.h"

#include <gtest/gtest.h>

#include <csignal>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/metrics.h"
#include "core/check.h"
#include "scripted_sse_server.h"

namespace inflight::bench {
namespace {

using namespace testing;  // NOLINT: the scripted-server helpers

class TapeClock {
 public:
  explicit TapeClock(std::vector<double> tape) : tape_(std::move(tape)) {}
  std::function<double()> fn() {
    return [this] {
      if (next_ == tape_.size()) {
        overrun_ = true;
        return tape_.back();
      }
      return tape_[next_++];
    };
  }
  bool fully_used() const { return next_ == tape_.size() && !overrun_; }

 private:
  std::vector<double> tape_;
  size_t next_ = 0;
  bool overrun_ = false;
};

std::vector<BenchRequest> requests(size_t n) {
  return std::vector<BenchRequest>(n, BenchRequest{"Say something", 5, 4});
}

ServeBenchOptions options_for(const ScriptedSseServer& server) {
  ServeBenchOptions o;
  o.base_url = server.base_url();
  o.model = "mock";
  o.max_concurrency = 1;
  o.progress = false;
  o.handle_sigint = false;
  o.ignore_eos = true;
  return o;
}

TEST(ServeBench, CompletionsMetricMathOnScriptedTimings) {
  ScriptedResponse broken = sse_response({completion_chunk("x")});
  broken.pieces.pop_back();  // no terminating chunk: the server hangs up mid-stream
  ScriptedSseServer server({
      // 0: empty first chunk, a two-token chunk, a finish-only chunk, usage.
      sse_response({completion_chunk(""), completion_chunk("Hello"), completion_chunk(" world"),
                    completion_chunk(" foo bar"), completion_chunk("", "length"), usage_chunk(5, 4),
                    "[DONE]"}),
      // 1: no usage chunk: output tokens are counted as token chunks (no tokenizer here).
      sse_response({completion_chunk("a"), completion_chunk("b"), completion_chunk("c"),
                    completion_chunk("", "stop"), "[DONE]"}),
      // 2: an HTTP error.
      error_response(500, "engine failed"),
      // 3: a clean stream without a single token.
      sse_response({completion_chunk("", "stop"), usage_chunk(5, 0), "[DONE]"}),
      // 4: the connection drops mid-stream.
      broken,
      // 5: one token; the connection is kept open ...
      sse_response({completion_chunk("z"), usage_chunk(5, 1), "[DONE]"}, /*close_after=*/false),
      // 6: ... and reused here; a three-token chunk.
      sse_response(
          {completion_chunk("p"), completion_chunk(" q r s"), usage_chunk(5, 4), "[DONE]"}),
  });
  TapeClock clock({10.0,                                                    // run start
                   10.0,  10.10, 10.25, 10.30, 10.42, 10.43, 10.44, 10.45,  // 0
                   10.50, 10.60, 10.70, 10.90, 10.91, 10.92,                // 1
                   11.0,                                                    // 2
                   11.1,  11.2,  11.3,  11.4,                               // 3
                   11.5,  11.6,                                             // 4
                   12.0,  12.2,  12.3,  12.4,                               // 5
                   12.5,  12.6,  12.9,  12.95, 13.0,                        // 6
                   13.5});                                                  // run end
  const ServeBenchRun run = run_serve_bench(options_for(server), requests(7), clock.fn());
  EXPECT_TRUE(clock.fully_used());
  EXPECT_FALSE(run.interrupted);
  EXPECT_DOUBLE_EQ(run.duration, 3.5);
  EXPECT_EQ(server.num_connections(), 6);  // request 6 reused request 5's connection

  const auto& r = run.records;
  ASSERT_EQ(r.size(), 7u);
  EXPECT_TRUE(r[0].success);
  EXPECT_NEAR(r[0].ttft, 0.25, 1e-12);
  ASSERT_EQ(r[0].itl.size(), 2u);
  EXPECT_NEAR(r[0].itl[0], 0.05, 1e-12);
  EXPECT_NEAR(r[0].itl[1], 0.12, 1e-12);
  EXPECT_NEAR(r[0].latency, 0.42, 1e-12);
  EXPECT_EQ(r[0].output_tokens, 4);
  EXPECT_EQ(r[0].generated_text, "Hello world foo bar");
  EXPECT_TRUE(r[1].success);
  EXPECT_EQ(r[1].output_tokens, -1);
  EXPECT_FALSE(r[2].success);
  EXPECT_NE(r[2].error.find("HTTP 500"), std::string::npos) << r[2].error;
  EXPECT_NE(r[2].error.find("engine failed"), std::string::npos) << r[2].error;
  EXPECT_FALSE(r[3].success);
  EXPECT_NE(r[3].error.find("no token chunk"), std::string::npos) << r[3].error;
  EXPECT_FALSE(r[4].success);
  EXPECT_NE(r[4].error.find("stream broken"), std::string::npos) << r[4].error;
  EXPECT_TRUE(r[5].success);
  EXPECT_TRUE(r[6].success);

  const std::vector<double> ps = {50, 90, 99};
  const auto m = compute_metrics(run.records, run.duration, ps, parse_goodput("ttft:210,tpot:120"));
  EXPECT_EQ(m.completed, 4);
  EXPECT_EQ(m.failed, 3);
  EXPECT_EQ(m.not_finished, 0);
  EXPECT_EQ(m.num_without_usage, 1);
  EXPECT_EQ(m.total_input, 20);
  EXPECT_EQ(m.total_output, 12);  // 4 + 3 (chunks) + 1 + 4
  EXPECT_DOUBLE_EQ(m.request_throughput, 4 / 3.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 12 / 3.5);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 32 / 3.5);
  EXPECT_DOUBLE_EQ(*m.request_goodput, 2 / 3.5);  // requests 5 and 6 meet both SLOs
  EXPECT_EQ(m.max_output_tokens_per_s, 6.0);
  EXPECT_EQ(m.max_concurrent_requests, 2);
  // numpy on ttft [.25 .1 .2 .1], tpot [.17/3 .15 .1], itl [.05 .12 .1 .2 .3],
  // e2el [.42 .4 .2 .4] (seconds), reported in ms.
  constexpr double kTol = 1e-9;
  EXPECT_NEAR(m.ttft_ms.mean, 162.5, kTol);
  EXPECT_NEAR(m.ttft_ms.median, 150.0, kTol);
  EXPECT_NEAR(m.ttft_ms.std, 64.9519052838329, kTol);
  EXPECT_NEAR(m.ttft_ms.percentiles[1].second, 235.0, kTol);
  EXPECT_NEAR(m.ttft_ms.percentiles[2].second, 248.5, kTol);
  EXPECT_NEAR(m.tpot_ms.mean, 102.22222222222223, kTol);
  EXPECT_NEAR(m.tpot_ms.median, 100.0, kTol);
  EXPECT_NEAR(m.tpot_ms.std, 38.135560670512255, kTol);
  EXPECT_NEAR(m.tpot_ms.percentiles[2].second, 149.0, kTol);
  EXPECT_NEAR(m.itl_ms.mean, 154.0, kTol);
  EXPECT_NEAR(m.itl_ms.median, 120.0, kTol);
  EXPECT_NEAR(m.itl_ms.std, 87.54427451295716, kTol);
  EXPECT_NEAR(m.itl_ms.percentiles[1].second, 260.0, kTol);
  EXPECT_NEAR(m.itl_ms.percentiles[2].second, 296.0, kTol);
  EXPECT_NEAR(m.e2el_ms.mean, 355.0, kTol);
  EXPECT_NEAR(m.e2el_ms.median, 400.0, kTol);
  EXPECT_NEAR(m.e2el_ms.std, 89.86100377805714, kTol);
  EXPECT_NEAR(m.e2el_ms.percentiles[2].second, 419.4, kTol);

  const auto bodies = server.request_bodies();
  ASSERT_EQ(bodies.size(), 7u);
  const auto body = nlohmann::json::parse(bodies[0]);
  EXPECT_EQ(body["model"], "mock");
  EXPECT_EQ(body["prompt"], "Say something");
  EXPECT_EQ(body["max_tokens"], 4);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(server.request_targets()[0], "/v1/completions");
}

TEST(ServeBench, ChatCompletionsSkipTheRoleChunk) {
  ScriptedSseServer server({
      sse_response({chat_chunk("", true), chat_chunk("Hi"), chat_chunk(" there"), usage_chunk(9, 2),
                    "[DONE]"}),
  });
  TapeClock clock({0.0, 0.0, 0.5, 1.0, 1.25, 1.5, 1.75, 2.0});
  ServeBenchOptions o = options_for(server);
  o.endpoint = Endpoint::kChatCompletions;
  o.endpoint_path = "/v1/chat/completions";
  o.base_url += "/";  // a trailing slash on the base URL is harmless
  const ServeBenchRun run = run_serve_bench(o, requests(1), clock.fn());
  EXPECT_TRUE(clock.fully_used());
  ASSERT_TRUE(run.records[0].success) << run.records[0].error;
  EXPECT_DOUBLE_EQ(run.records[0].ttft, 1.0);
  EXPECT_DOUBLE_EQ(run.records[0].latency, 1.25);
  EXPECT_EQ(run.records[0].output_tokens, 2);
  const auto body = nlohmann::json::parse(server.request_bodies()[0]);
  EXPECT_EQ(body["messages"][0]["role"], "user");
  EXPECT_EQ(body["messages"][0]["content"], "Say something");
  EXPECT_EQ(body["max_completion_tokens"], 4);
  EXPECT_EQ(server.request_targets()[0], "/v1/chat/completions");
}

TEST(ServeBench, MaxConcurrencyCapsRequestsInFlight) {
  ScriptedSseServer server(SyntheticStreams{4, 1, std::chrono::microseconds(2000)});
  ServeBenchOptions o = options_for(server);
  o.max_concurrency = 3;
  const ServeBenchRun run = run_serve_bench(o, requests(24));
  for (const auto& a : run.records) {
    ASSERT_TRUE(a.success) << a.error;
    EXPECT_EQ(a.output_tokens, 4);
    int active = 0;  // requests whose [start, last token] holds a's start
    for (const auto& b : run.records) {
      if (b.start_time <= a.start_time && a.start_time <= b.start_time + b.latency) ++active;
    }
    EXPECT_LE(active, 3);
  }
}

TEST(ServeBench, WarmupFailureAborts) {
  ScriptedSseServer server({error_response(404, "no such model")});
  ServeBenchOptions o = options_for(server);
  o.num_warmups = 1;
  EXPECT_THROW(run_serve_bench(o, requests(2)), Error);
}

TEST(ServeBench, InterruptKeepsWhatWasMeasured) {
  // Streams of 200 chunks 20 ms apart: nothing finishes before the interrupt.
  ScriptedSseServer server(SyntheticStreams{200, 1, std::chrono::microseconds(20000)});
  ServeBenchOptions o = options_for(server);
  o.max_concurrency = 0;
  o.handle_sigint = true;
  std::thread interrupter([&] {
    while (server.num_connections() < 4) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::raise(SIGINT);
  });
  const ServeBenchRun run = run_serve_bench(o, requests(4));
  interrupter.join();
  EXPECT_TRUE(run.interrupted);
  const std::vector<double> ps = {99};
  const auto m = compute_metrics(run.records, run.duration, ps, {});
  EXPECT_EQ(m.not_finished + m.completed, 4);
  EXPECT_GT(m.not_finished, 0);
}

TEST(ServeBench, ProbesTheServerForItsModel) {
  ScriptedSseServer server(SyntheticStreams{});
  EXPECT_EQ(probe_server(server.base_url(), "", 1.0), "mock");
  EXPECT_THROW(probe_server("https://example.com", "", 1.0), Error);
  // Still loading (503), then ready.
  ScriptedSseServer loading({error_response(503, "the model is still loading"),
                             error_response(404, "no model list here")});
  EXPECT_EQ(probe_server(loading.base_url(), "", 30.0), "");
  EXPECT_EQ(loading.request_targets().size(), 2u);
  ScriptedSseServer never({error_response(503, "loading")});
  EXPECT_THROW(probe_server(never.base_url(), "", 0.0), Error);
}

}  // namespace
}  // namespace inflight::bench
