// Engine::Impl: the state behind the public Engine.
//
// Threads: any number of client threads call enqueue/cancel/stats/shutdown; one engine thread
// runs loop(). They meet only in the inbox (mutex_) and the published stats (stats_mutex_);
// everything under "engine thread only" is touched by the loop alone, so the scheduler, the
// block pool and the requests need no locks.
//
// One loop iteration:
//   apply_inbox     admit new requests, apply cancellations (blocks freed at once), shutdown
//   step            schedule -> ForwardBatch -> runner.begin_step .. end_step -> sample ->
//                   update (tokens, num_computed_tokens, prefix cache, finished sequences)
//   publish_stats   snapshot for stats()
//   retire          hand queued outputs to streams, forget finished requests
// While more steps follow, publish_stats and retire of step N run inside step N + 1, between
// begin_step and end_step, overlapping the device's work (engine_loop.cc).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/kv_block_manager.h"
#include "engine/prepared_request.h"
#include "engine/request_state.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/structured_output.h"
#include "inflight/engine.h"
#include "runtime/forward_batch.h"
#include "runtime/model_runner.h"

namespace inflight {

// The Status of an exception: an Error's code mapped to the public StatusCode, else kInternal.
Status status_from(const std::exception& e);

class Engine::Impl {
 public:
  // `config` is validated and resolved (max_model_len and num_kv_blocks set); the runner's KV
  // cache is allocated.
  Impl(const EngineConfig& config, std::unique_ptr<ModelRunner> runner,
       std::shared_ptr<const Tokenizer> tokenizer);
  ~Impl();

  void start();
  Result<RequestHandle> enqueue(Request request);
  Status check_structured_output(const StructuredOutput& constraint);
  // Why this engine refuses constraints (ModelRunner::supports_token_masks is false).
  Status unsupported_masks() const;
  Status cancel(RequestId id);
  EngineStats stats() const;
  void shutdown(ShutdownMode mode);

  const EngineConfig& config() const { return config_; }
  int64_t vocab_size() const { return limits_.vocab_size; }
  const std::shared_ptr<const Tokenizer>& tokenizer() const { return tokenizer_; }
  std::string device_name() const { return std::string(runner_->device_name()); }

  // What Engine::load loaded; set before the engine is handed out, fixed afterwards.
  struct ModelInfo {
    std::string name;
    std::string chat_template;
  };
  const ModelInfo& model_info() const { return model_info_; }
  void set_model_info(ModelInfo info) { model_info_ = std::move(info); }

 private:
  void loop();
  bool apply_inbox();
  void step();
  // logits_request_ for the rows of `out`: candidates where the sampler allows, else whole rows.
  void build_logits_request(const SchedulerOutput& out);
  // LogitsRequest::fill_masks of logits_request_: the token bitmasks of mask_matchers_, filled in
  // parallel (core/thread_pool.h).
  void fill_masks(std::span<uint32_t> masks);
  void fail(const SchedulerOutput& out, const std::string& message);
  // The outputs of the steps done so far go to the clients; finished requests are retired.
  void hand_over();
  // For the lifetime of a synchronous step, its requests are the ones whose cancellation
  // abandons it (in_flight_, abandon_step_); an asynchronous step registers nothing.
  class AbandonableStep {
   public:
    AbandonableStep(Impl& impl, const SchedulerOutput& out);
    ~AbandonableStep();
    AbandonableStep(const AbandonableStep&) = delete;
    AbandonableStep& operator=(const AbandonableStep&) = delete;

   private:
    Impl& impl_;
  };
  void abort_all(FinishReason reason, const std::string& message);
  void publish_stats();
  void retire();
  void check_idle() const;
  StepContext context(TimePoint now);

  const EngineConfig config_;
  ModelInfo model_info_;
  std::unique_ptr<ModelRunner> runner_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<int32_t> eos_ids_;  // sorted
  AdmissionLimits limits_;
  StructuredOutputCompiler grammars_;  // thread-safe
  bool back_to_back_ = false;  // the next step follows the last without waiting for requests
  const bool overlap_;  // runner_->asynchronous(): hand over outputs while the next step runs
  std::atomic<int64_t> next_seq_id_{1};

  // ---- engine thread only (check_fits() and block counts excepted: fixed at start) ----------
  KvBlockManager kv_;
  Scheduler scheduler_;
  Sampler sampler_;
  ForwardBatch batch_;
  LogitsRequest logits_request_;
  std::vector<GrammarMatcher*> mask_matchers_;  // of logits_request_.masked_rows
  std::unordered_map<RequestId, std::unique_ptr<RequestState>> requests_;
  EngineStats stats_;

  // ---- shared with client threads, under mutex_ ----------------------------------------------
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<RequestState>> new_requests_;
  std::vector<RequestId> cancelled_;
  std::unordered_set<RequestId> live_;  // enqueued and not yet retired
  // Requests of the synchronous step in flight that nobody cancelled yet (always empty with an
  // asynchronous runner); when a cancel() empties it, the step is abandoned (abandon_step_),
  // which frees the runner from a step whose every token would be thrown away (a CPU step can
  // take seconds).
  std::unordered_set<RequestId> in_flight_;
  std::atomic<bool> abandon_step_{false};
  bool accepting_ = true;
  std::optional<ShutdownMode> stop_;
  RequestId next_request_id_ = 1;

  mutable std::mutex stats_mutex_;
  EngineStats published_;
  std::atomic<uint64_t> num_enqueued_{0};

  std::mutex join_mutex_;  // one shutdown() joins; others wait for it
  std::thread thread_;
};

}  // namespace inflight
