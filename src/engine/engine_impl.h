// Engine::Impl: the state behind the public Engine.
//
// Threads: any number of client threads call enqueue/cancel/stats/shutdown; one engine thread
// runs loop(). They meet only in the inbox (mutex_) and the published stats (stats_mutex_);
// everything under "engine thread only" is touched by the loop alone, so the scheduler, the
// block pool and the requests need no locks.
//
// One loop iteration:
//   apply_inbox     admit new requests, apply cancellations (blocks freed at once, or when the
//                   step computing them is over), shutdown
//   launch          schedule -> ForwardBatch -> runner.begin_step
//   complete        runner.end_step of the oldest step in flight -> sample -> update (tokens,
//                   num_computed_tokens, prefix cache, finished sequences)
//   publish_stats   snapshot for stats()
//   retire          hand queued outputs to streams, forget finished requests
// With max_num_micro_batches = D > 1 (pipeline stages), up to D steps are launched before the
// oldest completes, each over its own sequences. While more steps follow, publish_stats and
// retire of step N run between the launch of step N + 1 and its completion, overlapping the
// device's work (engine_loop.cc).
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
  // One step from its launch to its results: what the scheduler chose, the batch and logits
  // request the runner reads until the step ends, the matchers whose masks it fills.
  struct InFlightStep {
    SchedulerOutput out;
    ForwardBatch batch;
    LogitsRequest request;
    std::vector<GrammarMatcher*> mask_matchers;  // of request.masked_rows
    TimePoint start;
  };

  void loop();
  bool apply_inbox();
  // Schedules a step and begins it on the runner; false when nothing was launched (every
  // sequence that could run waits for a step in flight, or the step failed or was abandoned).
  bool launch();
  // Ends the oldest step in flight, samples its tokens and updates its requests.
  void complete();
  // Ends every step still in flight, dropping what they computed (the loop is stopping).
  void drop_in_flight();
  // The oldest step in flight leaves the ring; its entry keeps its contents until the next
  // launch.
  InFlightStep& pop_step();
  bool busy() const { return scheduler_.has_unfinished() || num_in_flight_ > 0; }
  // step.request for the rows of step.out: candidates where the sampler allows, else whole rows.
  void build_logits_request(InFlightStep& step);
  // LogitsRequest::fill_masks of a step: the token bitmasks of its mask_matchers, filled in
  // parallel (core/thread_pool.h).
  void fill_masks(const std::vector<GrammarMatcher*>& matchers, std::span<uint32_t> masks);
  void fail(const SchedulerOutput& out, const std::string& message);
  // The outputs of the steps done so far go to the clients; finished requests are retired.
  void hand_over();
  // For the lifetime of a synchronous step, its requests are the ones whose cancellation
  // abandons it (abandonable_, abandon_step_); an asynchronous step, or one of several in
  // flight, registers nothing.
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
  // Logits columns a token can have (LogitsRequest::sampled_vocab); 0 = all of them.
  int64_t sampled_vocab_ = 0;
  StructuredOutputCompiler grammars_;  // thread-safe
  bool back_to_back_ = false;  // the next step follows the last without waiting for requests
  const bool overlap_;  // runner_->asynchronous(): hand over outputs while the next step runs
  const size_t depth_;  // config_.max_num_micro_batches: most steps in flight
  std::atomic<int64_t> next_seq_id_{1};

  // ---- engine thread only (check_fits() and block counts excepted: fixed at start) ----------
  KvBlockManager kv_;
  Scheduler scheduler_;
  Sampler sampler_;
  // A ring of depth_ steps: steps_[first_step_] is the oldest of num_in_flight_ in flight.
  // Never resized (each step's fill_masks points at its entry).
  std::vector<InFlightStep> steps_;
  size_t first_step_ = 0;
  size_t num_in_flight_ = 0;
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
  std::unordered_set<RequestId> abandonable_;
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
