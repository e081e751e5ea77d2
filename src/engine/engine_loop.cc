// The engine thread's half of Engine::Impl: schedule -> forward -> sample -> update -> emit.
//
// Overlap with the device: runner.begin_step() only enqueues the step on an asynchronous
// backend, and while the device computes step N the loop does the host work that does not
// depend on it: the outputs of step N - 1 go to the clients' streams (detokenized text, stop
// checks and sampling were done when step N - 1 ended; this is the hand-over: stream pushes,
// client wake-ups, forgetting finished requests; first tokens go out at once, see complete())
// and the stats are published. What cannot overlap, because it needs step N's tokens:
// scheduling and building step N + 1 over the same sequences, and sampling step N. Sampling is
// cheap where the device selected the candidates (model_runner.h), and a decode step is a graph
// replay (model/decode_graphs.h), so the gap between two steps on the device is the scheduler's
// and the sampler's host time. Cancellations and new requests are applied between launches; a
// cancelled sequence in a step in flight keeps its blocks until the step is over
// (Scheduler::finish), and its request stays until then (retire()). A synchronous step whose
// every request gets cancelled is abandoned between two layers (cancel() raises
// abandon_step_), so that a long CPU step does not hold their blocks.
// With a synchronous runner (CPU: begin_step does the whole step) nothing can overlap, and the
// outputs are handed over right after the step that made them.
//
// Micro-batches (pipeline stages, max_num_micro_batches = D > 1): the loop launches steps over
// disjoint sequences until D are in flight, then completes the oldest, launches the next, and so
// on; the runner has each stage work on another step (parallel/parallel_runner.h). When every
// sequence that could run is in flight, the oldest step completes first. With D = 1 a step is
// launched and completed in turn, as without stages.
#include <pthread.h>

#include <algorithm>

#include "core/check.h"
#include "core/logging.h"
#include "core/thread_pool.h"
#include "engine/batch_builder.h"
#include "engine/engine_impl.h"

namespace inflight {

StepContext Engine::Impl::context(TimePoint now) {
  return StepContext{scheduler_, sampler_, stats_, next_seq_id_, now};
}

void Engine::Impl::loop() {
  pthread_setname_np(pthread_self(), "inflight-engine");
  try {
    while (apply_inbox()) {
      const bool launched = num_in_flight_ < depth_ && scheduler_.has_unfinished() && launch();
      if (launched && num_in_flight_ < depth_) continue;  // fill the pipeline first
      if (num_in_flight_ > 0) {
        // The device computes the steps in flight: hand over the outputs of those before.
        if (overlap_) hand_over();
        complete();
      }
      // With more steps to come on an asynchronous runner, the outputs are handed over while
      // the next one runs.
      if (overlap_ && busy()) continue;
      hand_over();
      if (busy()) continue;
      check_idle();
      back_to_back_ = false;
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return !new_requests_.empty() || !cancelled_.empty() || stop_; });
    }
  } catch (const std::exception& e) {
    // A broken invariant: nothing the engine computes from here on can be trusted.
    INFLIGHT_LOG_ERROR("engine loop stopped: {}", e.what());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      accepting_ = false;
    }
    try {
      abort_all(FinishReason::kError, std::string("internal engine error: ") + e.what());
    } catch (const std::exception& inner) {
      INFLIGHT_LOG_ERROR("engine: failed to abort requests: {}", inner.what());
    }
  }
  drop_in_flight();
  hand_over();
}

void Engine::Impl::hand_over() {
  publish_stats();
  retire();
}

bool Engine::Impl::apply_inbox() {
  std::vector<std::unique_ptr<RequestState>> arrived;
  std::vector<RequestId> cancelled;
  std::optional<ShutdownMode> stop;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    arrived.swap(new_requests_);
    cancelled.swap(cancelled_);
    stop = stop_;
  }
  for (auto& state : arrived) {
    scheduler_.add(&state->root());
    const RequestId id = state->id();
    requests_.emplace(id, std::move(state));
  }
  StepContext ctx = context(Clock::now());
  for (RequestId id : cancelled) {
    const auto it = requests_.find(id);
    if (it != requests_.end()) it->second->abort(FinishReason::kAbort, "", ctx);
  }
  if (stop == ShutdownMode::kAbort) {
    abort_all(FinishReason::kAbort, "");
    return false;
  }
  // NOTE: a request stays in requests_ while a step computes it, so a drain waits for every
  // step in flight.
  if (stop == ShutdownMode::kDrain && requests_.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    return !new_requests_.empty() || !cancelled_.empty();  // late arrivals still get served
  }
  return true;
}

bool Engine::Impl::launch() {
  const TimePoint start = Clock::now();
  InFlightStep& step = steps_[(first_step_ + num_in_flight_) % depth_];
  step.out = scheduler_.schedule();
  if (step.out.empty()) {
    // Admission guarantees that the first waiting or running sequence always fits once no step
    // is in flight, so an empty step then is a bug (and would spin this thread).
    INFLIGHT_CHECK(num_in_flight_ > 0, "nothing scheduled with {} running and {} waiting sequences",
                   scheduler_.num_running(), scheduler_.num_waiting());
    return false;
  }
  step.start = start;
  for (const ScheduledSequence& s : step.out.scheduled) {
    requests_.at(s.seq->request_id)->on_scheduled(start, stats_);
  }
  // A synchronous step can take seconds (a long prompt on the CPU): the gauges show its
  // sequences running and the rest waiting while it runs, not only once it has ended. (An
  // asynchronous step publishes in hand_over() while the device computes it.)
  if (!overlap_) publish_stats();
  build_forward_batch(step.out, config_.block_size, step.batch);
  build_logits_request(step);
  try {
    const AbandonableStep abandonable(*this, step.out);
    runner_->begin_step(step.batch, step.request);
  } catch (const StepAbandoned&) {
    // Every request in it was cancelled (abandonable_ is empty): the next apply_inbox() aborts
    // them and frees their blocks; finish_step() is skipped, so no half-written block enters
    // the prefix cache.
    scheduler_.drop_step(step.out);
    return false;
  } catch (const std::exception& e) {
    scheduler_.drop_step(step.out);
    fail(step.out, std::string("model step failed: ") + e.what());
    return false;
  }
  ++num_in_flight_;
  return true;
}

void Engine::Impl::complete() {
  InFlightStep& step = pop_step();
  const SchedulerOutput& out = step.out;
  StepLogits* logits = nullptr;
  try {
    logits = &runner_->end_step();
    INFLIGHT_CHECK(logits->num_rows == static_cast<int32_t>(step.batch.logits_indices.size()) &&
                       logits->vocab_size == limits_.vocab_size,
                   "the runner returned {} logits rows of vocabulary {} for {} rows of {}",
                   logits->num_rows, logits->vocab_size, step.batch.logits_indices.size(),
                   limits_.vocab_size);
  } catch (const std::exception& e) {
    scheduler_.drop_step(out);
    fail(out, std::string("model step failed: ") + e.what());
    return;
  }
  scheduler_.finish_step(out);
  ++stats_.num_steps;
  if (const std::optional<StepDeviceTime> t = runner_->last_step_device_time()) {
    stats_.device_busy_seconds += t->busy_s;
    if (back_to_back_ && t->idle_before_s >= 0.0) stats_.device_idle_seconds += t->idle_before_s;
  }
  back_to_back_ = true;
  stats_.num_computed_tokens += static_cast<uint64_t>(out.num_batched_tokens);

  StepContext ctx = context(Clock::now());
  int32_t row = 0;
  for (const ScheduledSequence& s : out.scheduled) {
    const int32_t first = row;
    row += s.prompt_rows + (s.sample ? 1 : 0);
    if (first == row) continue;
    // Its request failed or was cancelled while the step was in flight.
    if (s.seq->status != SequenceStatus::kRunning) continue;
    RequestState& req = *requests_.at(s.seq->request_id);
    try {
      for (int32_t r = 0; r < s.prompt_rows; ++r) {
        req.on_prompt_logits(logits->row(first + r), ctx);
      }
      if (!s.sample) continue;
      req.on_logits(*s.seq, logits->row(first + s.prompt_rows), ctx);
    } catch (const std::exception& e) {
      req.abort(FinishReason::kError, e.what(), ctx);
    }
    // A first token goes to its client now rather than while the next step runs: the device
    // waits for a few stream pushes, the new request saves the next step's scheduling and
    // launch in its time to first token. (A finished request waits for retire(), which makes
    // it not live before the client can see its end.)
    if (overlap_ && !req.finished() && req.timings().first_token == ctx.now) req.flush();
  }
  stats_.step_time.observe(RequestTimings::seconds(step.start, Clock::now()));
}

void Engine::Impl::drop_in_flight() {
  while (num_in_flight_ > 0) {
    InFlightStep& step = pop_step();
    try {
      runner_->end_step();
    } catch (const std::exception& e) {
      INFLIGHT_LOG_ERROR("engine: a step in flight at shutdown failed: {}", e.what());
    }
    scheduler_.drop_step(step.out);
  }
}

Engine::Impl::InFlightStep& Engine::Impl::pop_step() {
  InFlightStep& step = steps_[first_step_];
  first_step_ = (first_step_ + 1) % depth_;
  --num_in_flight_;
  return step;
}

Engine::Impl::AbandonableStep::AbandonableStep(Impl& impl, const SchedulerOutput& out)
    : impl_(impl) {
  // Only a synchronous step can be abandoned (the runner polls the flag between layers); an
  // asynchronous one is merely enqueued, so its bookkeeping would be work for nothing. With
  // several steps in flight, begin_step may compute an earlier step than this one.
  if (impl_.overlap_ || impl_.depth_ > 1) return;
  std::lock_guard<std::mutex> lock(impl_.mutex_);
  for (const ScheduledSequence& s : out.scheduled) impl_.abandonable_.insert(s.seq->request_id);
  impl_.abandon_step_.store(false, std::memory_order_relaxed);
}

Engine::Impl::AbandonableStep::~AbandonableStep() {
  // The step is over: a later cancel() no longer abandons anything.
  if (impl_.overlap_ || impl_.depth_ > 1) return;
  std::lock_guard<std::mutex> lock(impl_.mutex_);
  impl_.abandonable_.clear();
}

void Engine::Impl::build_logits_request(InFlightStep& step) {
  LogitsRequest& request = step.request;
  if (!request.fill_masks) {
    request.fill_masks = [this, &step](std::span<uint32_t> m) {
      fill_masks(step.mask_matchers, m);
    };
  }
  request.top_k = 0;
  request.sampled_vocab = sampled_vocab_;
  request.full_rows.clear();
  request.masked_rows.clear();
  step.mask_matchers.clear();
  const int64_t max_k = std::min<int64_t>(limits_.vocab_size, kMaxLogitsTopK);
  int32_t row = 0;
  for (const ScheduledSequence& s : step.out.scheduled) {
    // A prompt logprob row needs its prompt token's logit, wherever it ranks: whole rows.
    for (int32_t r = 0; r < s.prompt_rows; ++r) request.full_rows.push_back(row++);
    if (!s.sample) continue;
    RequestState& req = *requests_.at(s.seq->request_id);
    if (GrammarMatcher* m = req.matcher(*s.seq)) {
      request.masked_rows.push_back(row);
      step.mask_matchers.push_back(m);
    }
    const int32_t k = config_.device_sampling ? req.candidates_needed(*s.seq) : 0;
    if (k > 0 && k <= max_k) {
      request.top_k = std::max(request.top_k, k);
    } else {
      request.full_rows.push_back(row);
    }
    ++row;
  }
}

void Engine::Impl::fill_masks(const std::vector<GrammarMatcher*>& matchers,
                              std::span<uint32_t> masks) {
  const TimePoint start = Clock::now();
  const auto n = static_cast<int64_t>(matchers.size());
  const auto words = static_cast<int64_t>(masks.size()) / std::max<int64_t>(n, 1);
  ThreadPool::global().parallel_for(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      matchers[static_cast<size_t>(i)]->fill_mask(
          masks.subspan(static_cast<size_t>(i * words), static_cast<size_t>(words)));
    }
  });
  stats_.num_grammar_masks += static_cast<uint64_t>(n);
  stats_.grammar_mask_seconds += RequestTimings::seconds(start, Clock::now());
}

void Engine::Impl::fail(const SchedulerOutput& out, const std::string& message) {
  INFLIGHT_LOG_ERROR("engine: {}", message);
  StepContext ctx = context(Clock::now());
  for (const ScheduledSequence& s : out.scheduled) {
    const auto it = requests_.find(s.seq->request_id);
    if (it != requests_.end()) it->second->abort(FinishReason::kError, message, ctx);
  }
}

void Engine::Impl::abort_all(FinishReason reason, const std::string& message) {
  StepContext ctx = context(Clock::now());
  for (auto& [id, req] : requests_) req->abort(reason, message, ctx);
}

void Engine::Impl::publish_stats() {
  stats_.num_running = scheduler_.num_running();
  stats_.num_waiting = scheduler_.num_waiting();
  stats_.num_kv_blocks = kv_.num_blocks();
  stats_.num_free_kv_blocks = kv_.num_free_blocks();
  stats_.kv_usage = 1.0 - static_cast<double>(stats_.num_free_kv_blocks) /
                              static_cast<double>(stats_.num_kv_blocks);
  stats_.num_preemptions = scheduler_.num_preemptions();
  stats_.num_prefix_cache_queries = scheduler_.num_prefix_queries();
  stats_.num_prefix_cache_hits = scheduler_.num_prefix_hits();
  std::lock_guard<std::mutex> lock(stats_mutex_);
  published_ = stats_;
}

void Engine::Impl::retire() {
  std::vector<RequestId> done;
  for (auto& [id, req] : requests_) {
    if (req->finished()) done.push_back(id);
  }
  if (!done.empty()) {
    // Not live any more before the client can see the end: a cancel() after the last output
    // reliably answers kNotFound.
    std::lock_guard<std::mutex> lock(mutex_);
    for (RequestId id : done) live_.erase(id);
  }
  for (auto& [id, req] : requests_) req->flush();
  // A finished request that a step in flight still computes (cancelled) goes once it is over.
  for (RequestId id : done) {
    if (!requests_.at(id)->in_flight()) requests_.erase(id);
  }
}

void Engine::Impl::check_idle() const {
  // With no request left every block must be free (cached ones included).
  kv_.check_integrity();
  INFLIGHT_CHECK(requests_.empty() && kv_.num_free_blocks() == kv_.num_blocks(),
                 "idle engine holds {} requests and {} of {} KV blocks", requests_.size(),
                 kv_.num_blocks() - kv_.num_free_blocks(), kv_.num_blocks());
}

}  // namespace inflight
