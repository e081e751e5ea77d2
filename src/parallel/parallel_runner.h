// The runners of a tensor-parallel job (one process per rank, parallel/world.h).
//
// Rank 0 owns the engine: its ModelRunner is a ParallelRunner, which sends every call that
// touches the model (reserve the workspace, report memory, allocate the KV cache, run a step
// with its ForwardBatch and LogitsRequest) to the other ranks as one small control message
// before running it on its own shard. Every other rank runs serve_steps(), which receives those
// messages and makes the same calls on its shard's runner in the same order, so the ranks meet
// in the same collectives. Rank 0 samples; the others' logits are dropped.
//
// Pipeline stages overlap: rank 0 sits on the last stage, so a step reaches its shard only
// after every stage before has computed it. begin_step() sends the step to every rank at once
// (the first stage starts it) and queues it; rank 0's shard starts the oldest queued step once as
// many steps are queued as there are stages, or when end_step() asks for it. With P stages and P
// steps in flight, stage s computes step k + P - 1 - s while rank 0 computes step k; with one
// stage every step starts on rank 0 as soon as it is sent, as before.
//
// The memory plan sees the smallest rank: memory() reports the least free memory of all ranks.
// A failure on any rank (an exception out of a step) ends the whole job with a message naming
// the rank (World::abort): the ranks' states cannot be kept consistent past it. So does a step
// that does not finish in time on some rank (StepWatchdog: another rank hung; on rank 0 the
// clock restarts each time a step ends while others are in flight).
#pragma once

#include <deque>
#include <memory>

#include "parallel/step_watchdog.h"
#include "parallel/world.h"
#include "runtime/device_runner.h"
#include "runtime/model_runner.h"

namespace inflight {

class ParallelRunner final : public ModelRunner {
 public:
  // `local`: rank 0's shard; the other ranks run serve_steps() over theirs.
  ParallelRunner(std::unique_ptr<DeviceRunner> local, World& world);
  // Tells the other ranks to stop. Every step begun must have ended (else the job is ended:
  // the other ranks would wait for rank 0's part of it forever).
  ~ParallelRunner() override;

  const ModelConfig& model_config() const override { return local_->model_config(); }
  std::string_view device_name() const override { return local_->device_name(); }
  void reserve_workspace(int32_t max_num_batched_tokens, int32_t max_num_seqs) override;
  RunnerMemory memory() const override;
  int64_t kv_bytes_per_block(int32_t block_size) const override;
  void init_kv_cache(int64_t num_blocks, int32_t block_size) override;
  bool asynchronous() const override { return local_->asynchronous(); }
  // Rank 0 masks its own logits: with a replicated LM head on the last stage.
  bool supports_token_masks() const override { return local_->supports_token_masks(); }
  // Steps are never abandoned half-way: the other ranks would wait in a collective.
  void set_abandon_flag(const std::atomic<bool>*) override {}
  // One step per pipeline stage.
  int32_t max_steps_in_flight() const override { return local_->num_stages(); }
  void begin_step(const ForwardBatch& batch, const LogitsRequest& request) override;
  StepLogits& end_step() override;
  std::optional<StepDeviceTime> last_step_device_time() const override {
    return local_->last_step_device_time();
  }

 private:
  // Starts the oldest queued step on rank 0's shard, unless it has started.
  void begin_local();

  struct Queued {
    const ForwardBatch* batch;
    const LogitsRequest* request;
  };
  std::unique_ptr<DeviceRunner> local_;
  World& world_;
  std::deque<Queued> queued_;      // sent to every rank, not yet ended; oldest first
  bool local_begun_ = false;       // queued_.front() has begun on local_
  StepWatchdog watchdog_{world_};  // armed while a step is in flight
};

// Ranks other than 0: runs what rank 0's ParallelRunner sends on `runner` until it stops.
void serve_steps(DeviceRunner& runner, World& world);

}  // namespace inflight
