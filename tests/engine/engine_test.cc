// The engine end to end with a tiny random-weight Llama: batch invariance under every
// scheduling path (on every device: the TinyEngine suite runs on "cpu" and "cuda"), sampling,
// choices, stop rules, cancellation, shutdown, stats.
#include <gtest/gtest.h>

#include <dirent.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "engine_harness.h"
#include "model/arch_presets.h"

namespace inflight::testing {
namespace {

class TinyEngine : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    INFLIGHT_REQUIRE_DEVICE(GetParam());
    std::vector<Completion>& alone = alone_[GetParam()];
    if (alone.empty()) {
      auto engine = make_engine(small_config(), runner());
      alone = run_alone(*engine, mixed_requests(7));
    }
  }
  std::unique_ptr<ModelRunner> runner() const { return tiny_runner(tiny_model(), GetParam()); }
  const std::vector<Completion>& alone() const { return alone_.at(GetParam()); }

  static std::map<std::string, std::vector<Completion>> alone_;  // by device
};
std::map<std::string, std::vector<Completion>> TinyEngine::alone_;

INSTANTIATE_TEST_SUITE_P(Devices, TinyEngine, ::testing::Values("cpu", "cuda"));

TEST_P(TinyEngine, ConcurrentGreedyRequestsMatchTheirSoloRuns) {
  for (const auto& c : alone()) {
    ASSERT_TRUE(c.last.request_finished);
    EXPECT_EQ(c.finish[0], FinishReason::kLength);
  }
  auto engine = make_engine(small_config(), runner());
  expect_same_tokens(run_all(*engine, mixed_requests(7)), alone(), "concurrent");
  // Second pass on the same engine: prompts come from the prefix cache.
  const EngineStats before = engine->stats();
  expect_same_tokens(run_all(*engine, mixed_requests(7)), alone(), "prefix hits");
  const EngineStats after = engine->stats();
  EXPECT_GT(after.num_prefix_cache_hits - before.num_prefix_cache_hits, 500u);
}

TEST_P(TinyEngine, ChunkedPrefillGivesTheSameTokens) {
  EngineConfig c = small_config();
  c.max_num_batched_tokens = 7;  // prompts of up to 43 tokens in chunks of at most 7
  c.enable_prefix_caching = false;
  auto engine = make_engine(c, runner());
  expect_same_tokens(run_all(*engine, mixed_requests(7)), alone(), "chunked");
  c.max_num_batched_tokens = 64;
  c.long_prefill_token_threshold = 5;
  engine = make_engine(c, runner());
  expect_same_tokens(run_all(*engine, mixed_requests(7)), alone(), "capped chunks");
}

TEST_P(TinyEngine, PreemptionUnderATinyCacheLosesNothing) {
  for (const bool prefix : {false, true}) {
    EngineConfig c = small_config();
    c.block_size = 3;
    c.num_kv_blocks = 20;  // 60 tokens for 64 requests of up to 55 tokens each
    c.enable_prefix_caching = prefix;
    c.schedule_conservativeness = 0;  // optimistic admission: requests run out of blocks
    auto engine = make_engine(c, runner());
    expect_same_tokens(run_all(*engine, mixed_requests(7)), alone(),
                       prefix ? "preemption + prefix cache" : "preemption");
    const EngineStats s = engine->stats();
    EXPECT_GT(s.num_preemptions, 0u);
    EXPECT_EQ(s.num_free_kv_blocks, s.num_kv_blocks);
    EXPECT_EQ(s.num_running + s.num_waiting, 0);
  }
}

TEST(Engine, SeededSamplingIgnoresBatchComposition) {
  auto engine = make_engine(small_config(), tiny_runner(tiny_model()));
  Request r = greedy(random_tokens(9, 97, 5), 20);
  r.sampling.temperature = 2.0f;
  r.sampling.top_p = 0.95f;
  r.sampling.seed = 1234;
  const Completion alone = run_all(*engine, {r})[0];
  std::vector<Request> crowd = mixed_requests(3, 20);
  for (auto& q : crowd) q.sampling.temperature = 0.8f;  // unseeded noise around it
  crowd.insert(crowd.begin() + 7, r);
  const auto together = run_all(*engine, crowd);
  EXPECT_EQ(together[7].tokens, alone.tokens);
  r.sampling.seed = 4321;
  EXPECT_NE(run_all(*engine, {r})[0].tokens, alone.tokens);
}

TEST(Engine, ChoicesShareThePromptAndChoiceZeroMatchesASingleRun) {
  EngineConfig c = small_config();
  auto engine = make_engine(c, tiny_runner(tiny_model()));
  Request r = greedy(random_tokens(10, 97, 11), 8);  // 10 tokens: 2 full blocks + 2
  r.sampling.n = 3;
  Completion g = run_all(*engine, {r})[0];
  ASSERT_EQ(g.tokens.size(), 3u);
  EXPECT_EQ(g.tokens[1], g.tokens[0]) << "greedy choices recompute the tail identically";
  EXPECT_EQ(g.tokens[2], g.tokens[0]);
  EXPECT_EQ(g.last.usage.completion_tokens, 24);
  EXPECT_EQ(g.last.usage.prompt_tokens, 10);

  r.sampling.temperature = 2.0f;
  r.sampling.seed = 99;
  Completion sampled = run_all(*engine, {r})[0];
  Request single = r;
  single.sampling.n = 1;
  EXPECT_EQ(run_all(*engine, {single})[0].tokens[0], sampled.tokens[0]);
  EXPECT_NE(sampled.tokens[1], sampled.tokens[0]);
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.num_free_kv_blocks, s.num_kv_blocks);
}

TEST(Engine, StopTokensMinTokensAndIgnoreEos) {
  auto engine = make_engine(small_config(), tiny_runner(tiny_model()));
  const Request base = greedy(random_tokens(6, 97, 21), 12);
  const Completion free_run = run_all(*engine, {base})[0];
  const std::vector<int32_t>& ref = free_run.tokens[0];
  ASSERT_EQ(ref.size(), 12u);

  Request stop = base;
  stop.sampling.stop_token_ids = {ref[4]};
  const size_t first = static_cast<size_t>(std::find(ref.begin(), ref.end(), ref[4]) - ref.begin());
  Completion c = run_all(*engine, {stop})[0];
  EXPECT_EQ(c.tokens[0], std::vector<int32_t>(ref.begin(), ref.begin() + first + 1));
  EXPECT_EQ(c.finish[0], FinishReason::kStop);
  EXPECT_EQ(c.last.stop_token_id, ref[4]);

  // min_tokens: the stop token cannot be drawn before 8 tokens exist.
  stop.sampling.min_tokens = 8;
  c = run_all(*engine, {stop})[0];
  ASSERT_GE(c.tokens[0].size(), 8u);
  for (size_t i = 0; i < 7; ++i) EXPECT_NE(c.tokens[0][i], ref[4]) << i;

  // The same token as the model's EOS: stops, unless ignore_eos.
  auto eos_engine = make_engine(small_config(), tiny_runner(tiny_model(97, {ref[4]})));
  c = run_all(*eos_engine, {base})[0];
  EXPECT_EQ(c.finish[0], FinishReason::kStop);
  EXPECT_EQ(c.tokens[0].size(), first + 1);
  Request ignore = base;
  ignore.sampling.ignore_eos = true;
  c = run_all(*eos_engine, {ignore})[0];
  EXPECT_EQ(c.tokens[0], ref);
  EXPECT_EQ(c.finish[0], FinishReason::kLength);
}

TEST(Engine, LengthLimitsAndLogprobs) {
  EngineConfig cfg = small_config();
  cfg.max_model_len = 20;
  auto engine = make_engine(cfg, tiny_runner(tiny_model()));
  Request r = greedy(random_tokens(15, 97, 3), 5);
  r.sampling.logprobs = 4;
  Completion c = run_all(*engine, {r})[0];
  ASSERT_EQ(c.tokens[0].size(), 5u);
  EXPECT_EQ(c.finish[0], FinishReason::kLength);
  size_t num_lp = 0;
  for (const auto& o : c.outputs) {
    ASSERT_EQ(o.logprobs.size(), o.token_ids.size());
    for (size_t i = 0; i < o.logprobs.size(); ++i) {
      const TokenLogprob& lp = o.logprobs[i];
      ++num_lp;
      EXPECT_EQ(lp.token_id, o.token_ids[i]);
      ASSERT_EQ(lp.top.size(), 4u);
      EXPECT_EQ(lp.top[0].first, lp.token_id) << "greedy takes the most likely token";
      EXPECT_FLOAT_EQ(lp.top[0].second, lp.logprob);
      EXPECT_LE(lp.logprob, 0.0f);
      for (size_t k = 1; k < lp.top.size(); ++k) EXPECT_LE(lp.top[k].second, lp.top[k - 1].second);
    }
  }
  EXPECT_EQ(num_lp, 5u);
  // Without max_tokens the request runs to max_model_len.
  r.sampling.max_tokens.reset();
  c = run_all(*engine, {r})[0];
  EXPECT_EQ(c.tokens[0].size(), 5u);
  EXPECT_EQ(c.finish[0], FinishReason::kLength);
}

TEST(Engine, EnqueueRejectsWhatCanNeverRun) {
  EngineConfig cfg = small_config();
  cfg.max_model_len = 64;
  cfg.num_kv_blocks = 8;  // 32 tokens
  cfg.max_logprobs = 5;
  auto engine = make_engine(cfg, tiny_runner(tiny_model()));
  auto code = [&](Request r) { return engine->enqueue(std::move(r)).status().code(); };
  EXPECT_EQ(code(greedy({}, 4)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(greedy({1, 2, 97}, 4)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(greedy({1, -1}, 4)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(greedy(random_tokens(64, 97, 1), 1)), StatusCode::kResourceExhausted);
  EXPECT_EQ(code(greedy(random_tokens(30, 97, 1), 10)), StatusCode::kResourceExhausted);
  Request r = greedy({1, 2}, 4);
  r.sampling.top_p = 0.0f;
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = greedy({1, 2}, 4);
  r.sampling.logprobs = 6;
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = greedy({1, 2}, 4);
  r.sampling.stop_token_ids = {500};
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = greedy({1, 2}, 4);
  r.sampling.n = 65;
  EXPECT_EQ(code(r), StatusCode::kResourceExhausted);
  Request text;
  text.prompt = "no tokenizer here";
  EXPECT_EQ(code(text), StatusCode::kUnsupported);
  r = greedy({1, 2}, 4);
  r.sampling.stop = {"x"};
  EXPECT_EQ(code(r), StatusCode::kUnsupported);
  // Structured output needs the tokenizer's bytes of every token; an empty constraint is refused
  // before that.
  r = greedy({1, 2}, 4);
  r.sampling.structured_output = StructuredOutput{StructuredOutput::Kind::kRegex, "a+", {}, true};
  EXPECT_EQ(code(r), StatusCode::kUnsupported);
  EXPECT_EQ(engine->check_structured_output(*r.sampling.structured_output).code(),
            StatusCode::kUnsupported);
  r.sampling.structured_output->text.clear();
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->cancel(12345).code(), StatusCode::kNotFound);
  const auto ok = run_all(*engine, {greedy({1, 2}, 4)});
  EXPECT_TRUE(ok[0].status.ok());

  EngineConfig bad = small_config();
  bad.max_num_seqs = -1;
  EXPECT_EQ(Engine::create(bad, tiny_runner(tiny_model()), nullptr).status().code(),
            StatusCode::kInvalidArgument);
  bad = small_config();
  bad.num_kv_blocks = 0;
  bad.kv_cache_bytes = 10;
  EXPECT_EQ(Engine::create(bad, tiny_runner(tiny_model()), nullptr).status().code(),
            StatusCode::kResourceExhausted);
  bad = small_config();
  bad.max_model_len = 100000;
  EXPECT_EQ(Engine::create(bad, tiny_runner(tiny_model()), nullptr).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Engine::create(small_config(), nullptr, nullptr).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(Engine, OutputsStreamOneStepAtATimeWithTimings) {
  auto engine = make_engine(small_config(), tiny_runner(tiny_model()));
  std::atomic<int> notified{0};
  Request r = greedy(random_tokens(5, 97, 8), 6);
  r.notify = [&] { ++notified; };
  auto h = engine->enqueue(r);
  ASSERT_TRUE(h.ok());
  const Completion c = collect(h.value(), 1);
  ASSERT_EQ(c.outputs.size(), 6u) << "one output per step";
  TimePoint prev{};
  for (const auto& o : c.outputs) {
    EXPECT_EQ(o.id, h->id);
    EXPECT_EQ(o.token_ids.size(), 1u);
    EXPECT_GE(o.time, prev);
    prev = o.time;
  }
  // notify runs just after each push, so the last one may trail the stream's end a little.
  for (int i = 0; i < 1000 && notified.load() < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(notified.load(), 6);
  const RequestTimings& t = c.last.timings;
  EXPECT_LE(t.arrival, t.first_scheduled);
  EXPECT_LE(t.first_scheduled, t.first_token);
  EXPECT_LE(t.first_token, t.last_token);
  EXPECT_LE(t.last_token, t.finished);
  EXPECT_EQ(c.last.usage.prompt_tokens, 5);
  EXPECT_EQ(c.last.usage.completion_tokens, 6);

  const EngineStats s = engine->stats();
  EXPECT_EQ(s.num_requests_enqueued, 1u);
  EXPECT_EQ(s.num_requests_finished, 1u);
  EXPECT_EQ(s.num_requests_length, 1u);
  EXPECT_EQ(s.num_prompt_tokens, 5u);
  EXPECT_EQ(s.num_generation_tokens, 6u);
  EXPECT_EQ(s.num_computed_tokens, 5u + 5u);
  EXPECT_EQ(s.time_to_first_token.count, 1u);
  EXPECT_EQ(s.inter_token_latency.count, 5u);
  EXPECT_EQ(s.e2e_latency.count, 1u);
  EXPECT_EQ(s.queue_time.count, 1u);
  EXPECT_EQ(s.num_steps, 6u);
}

TEST(Engine, CancelFreesBlocksWithinOneStep) {
  auto engine = make_engine(small_config(), tiny_runner(tiny_model()));
  Request r = greedy(random_tokens(30, 97, 4), 400);
  auto h = engine->enqueue(r);
  ASSERT_TRUE(h.ok());
  std::vector<RequestOutput> outs;
  while (outs.size() < 3) h->stream->wait_pop(outs, std::chrono::milliseconds(20));
  ASSERT_GT(engine->stats().num_kv_blocks - engine->stats().num_free_kv_blocks, 0);
  const uint64_t steps_at_cancel = engine->stats().num_steps;
  ASSERT_TRUE(engine->cancel(h->id).ok());
  const Completion c = collect(h.value(), 1);
  EXPECT_EQ(c.finish[0], FinishReason::kAbort);
  const EngineStats s = engine->stats();
  EXPECT_LE(s.num_steps, steps_at_cancel + 1) << "the cancel waited for more than one step";
  EXPECT_EQ(s.num_free_kv_blocks, s.num_kv_blocks);
  EXPECT_EQ(s.num_requests_aborted, 1u);
  EXPECT_EQ(engine->cancel(h->id).code(), StatusCode::kNotFound) << "already retired";
}

// A CPU step can take seconds. When every request in it is cancelled, the engine abandons it
// between two layers instead of computing tokens nobody will read: the blocks are free long
// before the step would have ended, and the abandoned step is not counted.
TEST(Engine, CancellingEveryRequestOfAStepAbandonsIt) {
  ModelConfig c = *arch_preset("smollm2-135m");
  c.num_layers = 6;
  c.vocab_size = 1000;
  EngineConfig config;
  config.block_size = 16;
  config.num_kv_blocks = 256;
  config.max_num_batched_tokens = 1024;
  auto engine = make_engine(config, make_runner(make_backend("cpu"), c, nullptr, uint64_t{7}));
  auto timed = [&](uint32_t seed, bool cancel_midway, double wait_s) {
    const auto start = Clock::now();
    auto h = engine->enqueue(greedy(random_tokens(768, 1000, seed), 1));
    EXPECT_TRUE(h.ok());
    if (cancel_midway) {
      std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
      EXPECT_TRUE(engine->cancel(h->id).ok());
    }
    const Completion done = collect(h.value(), 1);
    return std::make_pair(done, std::chrono::duration<double>(Clock::now() - start).count());
  };
  // One whole prefill step, for scale.
  const auto [whole, step_s] = timed(1, false, 0.0);
  ASSERT_EQ(whole.tokens[0].size(), 1u);
  const uint64_t steps_before = engine->stats().num_steps;
  // The same work, cancelled a quarter of the way in.
  const auto [cancelled, cancelled_s] = timed(2, true, step_s / 4);
  EXPECT_EQ(cancelled.finish[0], FinishReason::kAbort);
  EXPECT_TRUE(cancelled.tokens[0].empty());
  EXPECT_LT(cancelled_s, 0.75 * step_s) << "a whole step takes " << step_s << " s";
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.num_steps, steps_before) << "the cancelled step ran to its end";
  EXPECT_EQ(s.num_free_kv_blocks, s.num_kv_blocks);
  // The engine goes on: the next request is served in full.
  EXPECT_EQ(timed(3, false, 0.0).first.tokens[0].size(), 1u);
}

TEST(Engine, CancelRightAfterEnqueue) {
  auto engine = make_engine(small_config(), tiny_runner(tiny_model()));
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 16; ++i) {
    auto h = engine->enqueue(greedy(random_tokens(12, 97, i), 200));
    ASSERT_TRUE(h.ok());
    ASSERT_TRUE(engine->cancel(h->id).ok());
    handles.push_back(h.value());
  }
  for (auto& h : handles) {
    const Completion c = collect(h, 1);
    EXPECT_EQ(c.finish[0], FinishReason::kAbort);
    EXPECT_LT(c.tokens[0].size(), 200u);
    EXPECT_TRUE(c.last.request_finished);
  }
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.num_requests_aborted, 16u);
  EXPECT_EQ(s.num_free_kv_blocks, s.num_kv_blocks);
}

// The real runner with a failure injected into chosen steps (a device error, say).
class FailingRunner final : public ForwardingRunner {
 public:
  using ForwardingRunner::ForwardingRunner;
  std::atomic<int> fail_next{0};

  void begin_step(const ForwardBatch& batch, const LogitsRequest& request) override {
    if (fail_next > 0) {
      --fail_next;
      INFLIGHT_THROW(ErrorCode::kInternal, "injected device fault");
    }
    ForwardingRunner::begin_step(batch, request);
  }
};

TEST(Engine, AFailedStepFailsItsRequestsAndTheEngineGoesOn) {
  auto runner = std::make_unique<FailingRunner>(tiny_runner(tiny_model()));
  FailingRunner* failing = runner.get();
  auto engine = make_engine(small_config(), std::move(runner));
  const auto requests = mixed_requests(7, 8);
  const auto before = run_all(*engine, requests);
  failing->fail_next = 1;
  const auto failed = run_all(*engine, requests);
  // The requests in the failing step fail with its error; the others (arrived later) are
  // untouched.
  uint64_t num_failed = 0;
  for (size_t i = 0; i < failed.size(); ++i) {
    if (failed[i].finish[0] == FinishReason::kError) {
      ++num_failed;
      EXPECT_NE(failed[i].last.error.find("injected device fault"), std::string::npos)
          << failed[i].last.error;
      EXPECT_TRUE(failed[i].tokens[0].empty());
    } else {
      EXPECT_EQ(failed[i].tokens, before[i].tokens) << i;
    }
  }
  EXPECT_GE(num_failed, 1u);
  EXPECT_EQ(engine->stats().num_requests_failed, num_failed);
  EXPECT_EQ(engine->stats().num_free_kv_blocks, engine->stats().num_kv_blocks);
  expect_same_tokens(run_all(*engine, requests), before, "after the failure");
}

size_t num_threads() {
  size_t n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

TEST(Engine, ShutdownDrainsOrAbortsAndLeavesNoThread) {
  {  // warm up process-wide pools (the CPU backend's workers) before counting
    auto warm = make_engine(small_config(), tiny_runner(tiny_model()));
    run_all(*warm, {greedy({1, 2, 3}, 2)});
  }
  const size_t threads_before = num_threads();
  auto engine = make_engine(small_config(), tiny_runner(tiny_model()));
  EXPECT_EQ(num_threads(), threads_before + 1);
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 8; ++i) handles.push_back(engine->enqueue(greedy({1, 2, 3, i}, 5)).value());
  engine->shutdown(ShutdownMode::kDrain);
  for (auto& h : handles) EXPECT_EQ(collect(h, 1).finish[0], FinishReason::kLength);
  EXPECT_EQ(engine->enqueue(greedy({1}, 1)).status().code(), StatusCode::kUnavailable);
  engine->shutdown(ShutdownMode::kAbort);  // idempotent
  EXPECT_EQ(num_threads(), threads_before);

  engine = make_engine(small_config(), tiny_runner(tiny_model()));
  handles.clear();
  for (int i = 0; i < 8; ++i) {
    handles.push_back(engine->enqueue(greedy(random_tokens(20, 97, i), 300)).value());
  }
  std::vector<RequestOutput> first;
  handles[0].stream->wait_pop(first, std::chrono::seconds(5));
  engine->shutdown(ShutdownMode::kAbort);
  for (auto& h : handles) EXPECT_EQ(collect(h, 1).finish[0], FinishReason::kAbort);
  engine.reset();
  EXPECT_EQ(num_threads(), threads_before);
}

TEST(Engine, ManyClientThreadsAtOnce) {
  auto engine = make_engine(small_config(), tiny_runner(tiny_model()));
  const auto requests = mixed_requests(17, 32);
  std::vector<Completion> got(requests.size());
  std::vector<std::thread> clients;
  for (size_t t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (size_t i = t; i < requests.size(); i += 4) got[i] = run_all(*engine, {requests[i]})[0];
    });
  }
  for (auto& t : clients) t.join();
  engine->shutdown();
  auto reference = make_engine(small_config(), tiny_runner(tiny_model()));
  expect_same_tokens(got, run_alone(*reference, requests), "threads");
}

}  // namespace
}  // namespace inflight::testing
