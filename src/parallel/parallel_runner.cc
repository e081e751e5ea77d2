#include "parallel/parallel_runner.h"

#include <exception>
#include <utility>

#include "core/check.h"
#include "core/logging.h"
#include "parallel/runner_messages.h"

namespace inflight {
namespace {

// Runs `f`; an exception ends the whole job, naming this rank and the cause.
template <typename F>
decltype(auto) or_abort(World& world, const char* what, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    INFLIGHT_LOG_ERROR("rank {} of {}: {} failed: {}; stopping every rank", world.rank(),
                       world.size(), what, e.what());
    world.abort(1);
  }
}

}  // namespace

ParallelRunner::ParallelRunner(std::unique_ptr<DeviceRunner> local, World& world)
    : local_(std::move(local)), world_(world) {
  INFLIGHT_CHECK(local_ != nullptr && world_.rank() == 0,
                 "a ParallelRunner runs on rank 0 over its shard");
}

ParallelRunner::~ParallelRunner() {
  if (!queued_.empty()) {
    INFLIGHT_LOG_ERROR("rank 0: {} steps in flight when the engine stopped; stopping every rank",
                       queued_.size());
    world_.abort(1);
  }
  world_.send_to_all(encode(RunnerCommand::kStop));
  world_.end();
  watchdog_.stop();
  world_.leave();
}

void ParallelRunner::reserve_workspace(int32_t max_num_batched_tokens, int32_t max_num_seqs) {
  world_.send_to_all(
      encode(RunnerCommand::kReserveWorkspace, max_num_batched_tokens, max_num_seqs));
  or_abort(world_, "reserving the workspace",
           [&] { local_->reserve_workspace(max_num_batched_tokens, max_num_seqs); });
}

RunnerMemory ParallelRunner::memory() const {
  world_.send_to_all(encode(RunnerCommand::kMemory));
  RunnerMemory mem = local_->memory();
  mem.free = world_.min_over_ranks(mem.free);
  return mem;
}

int64_t ParallelRunner::kv_bytes_per_block(int32_t block_size) const {
  // Pipeline stages may hold different numbers of layers: the plan takes the largest.
  world_.send_to_all(encode(RunnerCommand::kKvBytesPerBlock, block_size));
  return -world_.min_over_ranks(-local_->kv_bytes_per_block(block_size));
}

void ParallelRunner::init_kv_cache(int64_t num_blocks, int32_t block_size) {
  world_.send_to_all(encode(RunnerCommand::kInitKvCache, num_blocks, block_size));
  or_abort(world_, "allocating the KV cache",
           [&] { local_->init_kv_cache(num_blocks, block_size); });
}

void ParallelRunner::begin_step(const ForwardBatch& batch, const LogitsRequest& request) {
  INFLIGHT_CHECK(static_cast<int32_t>(queued_.size()) < max_steps_in_flight(),
                 "{} steps in flight over {} pipeline stages", queued_.size() + 1,
                 max_steps_in_flight());
  world_.post_to_all(encode_step(batch, request));
  if (queued_.empty()) watchdog_.arm("a step");
  queued_.push_back({&batch, &request});
  if (static_cast<int32_t>(queued_.size()) == max_steps_in_flight()) begin_local();
}

void ParallelRunner::begin_local() {
  if (local_begun_) return;
  // Rank 0 may now block on its device for this step while the other ranks still need its
  // message (or a later one) to begin: World's courier sees the messages through meanwhile.
  const Queued& q = queued_.front();
  or_abort(world_, "a step", [&] { local_->begin_step(*q.batch, *q.request); });
  local_begun_ = true;
}

StepLogits& ParallelRunner::end_step() {
  INFLIGHT_CHECK(!queued_.empty(), "end_step without a step in flight");
  begin_local();
  StepLogits& out = or_abort(world_, "a step", [&]() -> StepLogits& { return local_->end_step(); });
  queued_.pop_front();
  local_begun_ = false;
  if (queued_.empty()) {
    watchdog_.disarm();
  } else {
    watchdog_.arm("a step");  // the next step's time starts now
  }
  return out;
}

void serve_steps(DeviceRunner& runner, World& world) {
  INFLIGHT_CHECK(world.rank() != 0, "rank 0 runs the engine, not serve_steps");
  StepWatchdog watchdog(world);
  while (true) {
    const RunnerMessage m = decode(world.receive_from_root());
    switch (m.command) {
      case RunnerCommand::kReserveWorkspace:
        or_abort(world, "reserving the workspace", [&] {
          runner.reserve_workspace(static_cast<int32_t>(m.a), static_cast<int32_t>(m.b));
        });
        break;
      case RunnerCommand::kMemory:
        world.min_over_ranks(runner.memory().free);
        break;
      case RunnerCommand::kKvBytesPerBlock:
        world.min_over_ranks(-runner.kv_bytes_per_block(static_cast<int32_t>(m.a)));
        break;
      case RunnerCommand::kInitKvCache:
        or_abort(world, "allocating the KV cache",
                 [&] { runner.init_kv_cache(m.a, static_cast<int32_t>(m.b)); });
        break;
      case RunnerCommand::kStep:
        watchdog.arm("a step");
        or_abort(world, "a step", [&] {
          runner.begin_step(m.batch, m.request);
          runner.end_step();
        });
        watchdog.disarm();
        break;
      case RunnerCommand::kStop:
        return;
    }
  }
}

}  // namespace inflight
