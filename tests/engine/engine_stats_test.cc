// The engine's gauges while a step runs: a synchronous step (a long prompt on the CPU) can take
// seconds, and /metrics must show its work then, not only once it has ended.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "engine_harness.h"

namespace inflight::testing {
namespace {

// The real runner, whose steps wait in begin_step until the test lets them go.
class GatedRunner final : public ForwardingRunner {
 public:
  using ForwardingRunner::ForwardingRunner;

  // Waits until `n` steps have begun (each then waits for release()).
  void wait_for_steps(int n) {
    std::unique_lock lock(mutex_);
    ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(30), [&] { return begun_ >= n; }))
        << begun_ << " steps began, " << n << " awaited";
  }
  // Lets `n` more steps run.
  void release(int n) {
    std::lock_guard lock(mutex_);
    allowed_ += n;
    cv_.notify_all();
  }

  void begin_step(const ForwardBatch& batch, const LogitsRequest& request) override {
    {
      std::unique_lock lock(mutex_);
      const int step = ++begun_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return allowed_ >= step; });
    }
    ForwardingRunner::begin_step(batch, request);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int begun_ = 0;    // steps that reached begin_step
  int allowed_ = 0;  // steps that may run
};

TEST(EngineStats, GaugesShowTheStepInFlightAndTheQueueBehindIt) {
  auto runner = std::make_unique<GatedRunner>(tiny_runner(tiny_model()));
  GatedRunner* gated = runner.get();
  EngineConfig config = small_config();
  config.max_num_seqs = 1;  // one runs, the others wait
  auto engine = make_engine(config, std::move(runner));
  ASSERT_NE(engine, nullptr);
  // Destroyed before the engine: a failed assertion must not leave its loop gated.
  const std::shared_ptr<void> open_gate(nullptr, [&](void*) { gated->release(1 << 20); });

  auto first = engine->enqueue(greedy(random_tokens(20, 97, 1), 2));
  ASSERT_TRUE(first.ok());
  gated->wait_for_steps(1);
  // The first step is in flight: its sequence runs.
  EngineStats s = engine->stats();
  EXPECT_EQ(s.num_running, 1);
  EXPECT_EQ(s.num_waiting, 0);
  EXPECT_LT(s.num_free_kv_blocks, s.num_kv_blocks) << "the running prompt holds blocks";

  // Arrivals during the step wait in the inbox until it ends: they are waiting already.
  auto second = engine->enqueue(greedy(random_tokens(20, 97, 2), 2));
  auto third = engine->enqueue(greedy(random_tokens(20, 97, 3), 2));
  ASSERT_TRUE(second.ok() && third.ok());
  s = engine->stats();
  EXPECT_EQ(s.num_running, 1);
  EXPECT_EQ(s.num_waiting, 2);

  // The next step: the first request decodes; the others, admitted now, wait for a free
  // sequence slot.
  gated->release(1);
  gated->wait_for_steps(2);
  s = engine->stats();
  EXPECT_EQ(s.num_running, 1);
  EXPECT_EQ(s.num_waiting, 2);

  gated->release(1 << 20);
  for (const auto* h : {&first, &second, &third}) {
    EXPECT_EQ(collect(h->value(), 1).finish[0], FinishReason::kLength);
  }
  s = engine->stats();
  EXPECT_EQ(s.num_running, 0);
  EXPECT_EQ(s.num_waiting, 0);
}

}  // namespace
}  // namespace inflight::testing
