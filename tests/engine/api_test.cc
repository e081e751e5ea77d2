// The plain public types: Status, Result, SamplingParams and EngineConfig validation,
// Histogram, OutputStream.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <thread>

#include "engine/stream_state.h"
#include "inflight/config.h"
#include "inflight/output_stream.h"
#include "inflight/sampling_params.h"
#include "inflight/stats.h"

namespace inflight {
namespace {

TEST(Status, OkAndErrors) {
  EXPECT_TRUE(Status().ok());
  const Status s(StatusCode::kInvalidArgument, "top_p must be in (0, 1], got 2");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.to_string(), "invalid_argument: top_p must be in (0, 1], got 2");
  Result<int> r = 5;
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(*r, 5);
  Result<int> e = Status(StatusCode::kNotFound, "no such request");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  Result<int> bogus = Status();  // an "error" without an error is a bug, reported as one
  EXPECT_FALSE(bogus.ok());
  EXPECT_EQ(bogus.status().code(), StatusCode::kInternal);
}

TEST(SamplingParams, DefaultsAreValid) {
  EXPECT_TRUE(SamplingParams().validate().ok());
}

TEST(SamplingParams, EachBadValueIsRejectedNamingItsField) {
  struct Case {
    std::function<void(SamplingParams&)> set;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](SamplingParams& p) { p.n = 0; }, "n must"},
      {[](SamplingParams& p) { p.temperature = -0.5f; }, "temperature"},
      {[](SamplingParams& p) { p.temperature = NAN; }, "temperature"},
      {[](SamplingParams& p) { p.top_k = -2; }, "top_k"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p"},
      {[](SamplingParams& p) { p.min_p = -0.1f; }, "min_p"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.frequency_penalty = 2.5f; }, "frequency_penalty"},
      {[](SamplingParams& p) { p.presence_penalty = -3.0f; }, "presence_penalty"},
      {[](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens"},
      {[](SamplingParams& p) { p.min_tokens = -1; }, "min_tokens"},
      {[](SamplingParams& p) {
         p.max_tokens = 3;
         p.min_tokens = 4;
       },
       "min_tokens"},
      {[](SamplingParams& p) {
         p.stop = {"ok", ""};
       },
       "stop"},
      {[](SamplingParams& p) { p.logprobs = -1; }, "logprobs"},
  };
  for (const auto& c : cases) {
    SamplingParams p;
    c.set(p);
    const Status s = p.validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s.message();
  }
  SamplingParams edge;
  edge.top_k = -1;
  edge.top_p = 1.0f;
  edge.min_p = 1.0f;
  edge.temperature = 0.0f;
  edge.frequency_penalty = -2.0f;
  EXPECT_TRUE(edge.validate().ok());
}

TEST(EngineConfig, ValidationNamesTheField) {
  EXPECT_TRUE(EngineConfig().validate().ok());
  EngineConfig c;
  c.block_size = 0;
  EXPECT_NE(c.validate().message().find("block_size"), std::string::npos);
  c = EngineConfig();
  c.max_num_seqs = 0;  // from the memory plan
  EXPECT_TRUE(c.validate().ok());
  c.max_num_seqs = -1;
  EXPECT_NE(c.validate().message().find("max_num_seqs"), std::string::npos);
  c = EngineConfig();
  c.max_num_batched_tokens = -1;
  EXPECT_NE(c.validate().message().find("max_num_batched_tokens"), std::string::npos);
  c = EngineConfig();
  c.max_num_micro_batches = -1;  // 0: one per pipeline stage
  EXPECT_NE(c.validate().message().find("max_num_micro_batches"), std::string::npos);
  c = EngineConfig();
  c.num_kv_blocks = 0;
  c.kv_cache_bytes = -1;  // 0 is automatic
  EXPECT_EQ(c.validate().code(), StatusCode::kInvalidArgument);
}

TEST(Histogram, BucketsAreUpperBoundsInclusive) {
  Histogram h({0.1, 1.0});
  for (double v : {0.05, 0.1, 0.5, 1.0, 7.0}) h.observe(v);
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{2, 2, 1}));
  EXPECT_EQ(h.cumulative(0), 2u);
  EXPECT_EQ(h.cumulative(1), 4u);
  EXPECT_EQ(h.cumulative(2), 5u);
  EXPECT_EQ(h.count, 5u);
  EXPECT_DOUBLE_EQ(h.sum, 8.65);
  const EngineStats stats;
  EXPECT_EQ(stats.time_to_first_token.counts.size(), stats.time_to_first_token.bounds.size() + 1);
  EXPECT_TRUE(std::is_sorted(stats.e2e_latency.bounds.begin(), stats.e2e_latency.bounds.end()));
}

TEST(OutputStream, ProducerNeverWaitsAndConsumerSeesEverythingInOrder) {
  std::atomic<int> notified{0};
  auto state = std::make_shared<detail::StreamState>(7, [&] { ++notified; });
  OutputStream stream(state);
  EXPECT_EQ(stream.id(), 7u);
  std::vector<RequestOutput> got;
  EXPECT_EQ(stream.try_pop(got), 0u);
  EXPECT_EQ(stream.wait_pop(got, std::chrono::milliseconds(1)), 0u);

  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) {
      std::vector<RequestOutput> batch(1);
      batch[0].token_ids = {i};
      batch[0].request_finished = i == 99;
      state->push(batch);
    }
  });
  while (!stream.done()) stream.wait_pop(got, std::chrono::milliseconds(50));
  producer.join();
  ASSERT_EQ(got.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got[static_cast<size_t>(i)].token_ids[0], i);
  EXPECT_TRUE(got.back().request_finished);
  EXPECT_EQ(notified, 100);
  EXPECT_TRUE(stream.finished());
}

}  // namespace
}  // namespace inflight
