#include "frontend/generation.h"

#include <fmt/format.h>

#include "core/logging.h"
#include "frontend/error_mapping.h"

namespace inflight::frontend {

void Generation::Notifier::notify() {
  std::lock_guard lock(mutex);
  if (wake) {
    wake();
  } else {
    fired = true;
  }
}

Generation::Generation(Frontend& frontend, std::shared_ptr<Engine> engine)
    : frontend_(frontend),
      keep_alive_(frontend.weak_from_this().lock()),
      engine_(std::move(engine)),
      notifier_(std::make_shared<Notifier>()) {}

std::shared_ptr<Generation> Generation::submit(Frontend& frontend, std::vector<Request> requests) {
  std::shared_ptr<Engine> engine = frontend.model().engine;
  if (!frontend.try_acquire_slot()) {
    throw ApiError(429, fmt::format("the server is at capacity ({} requests in flight); retry "
                                    "later",
                                    frontend.options().max_concurrent_requests));
  }
  // From here the destructor releases the slot and cancels what was queued.
  std::shared_ptr<Generation> g(new Generation(frontend, std::move(engine)));
  for (auto& request : requests) {
    // The callback outlives neither the notifier (shared) nor the engine request.
    request.notify = [n = g->notifier_] { n->notify(); };
    Result<RequestHandle> handle = g->engine_->enqueue(std::move(request));
    if (!handle.ok()) throw_status(handle.status());
    g->handles_.push_back(std::move(handle).value());
    g->finished_.push_back(false);
  }
  return g;
}

Generation::~Generation() {
  cancel();
  frontend_.release_slot();
}

void Generation::set_wake(std::function<void()> wake) {
  std::lock_guard lock(notifier_->mutex);
  notifier_->wake = std::move(wake);
  if (notifier_->fired) notifier_->wake();
}

bool Generation::take(std::vector<TaggedOutput>& out) {
  bool all = true;
  for (size_t p = 0; p < handles_.size(); ++p) {
    if (finished_[p]) continue;
    scratch_.clear();
    handles_[p].stream->try_pop(scratch_);
    for (auto& o : scratch_) {
      if (o.request_finished) {
        finished_[p] = true;
        usage_.prompt_tokens += o.usage.prompt_tokens;
        usage_.completion_tokens += o.usage.completion_tokens;
        usage_.cached_prompt_tokens += o.usage.cached_prompt_tokens;
        const double ttft = o.timings.ttft_seconds();
        if (ttft > 0.0 && (ttft_s_ == 0.0 || ttft < ttft_s_)) ttft_s_ = ttft;
      }
      out.push_back(TaggedOutput{p, std::move(o)});
    }
    all = all && finished_[p];
  }
  return all;
}

void Generation::cancel() {
  for (size_t p = 0; p < handles_.size(); ++p) {
    if (finished_[p] || handles_[p].stream->finished()) continue;
    // kNotFound means it finished meanwhile: nothing left to free.
    Status s = engine_->cancel(handles_[p].id);
    if (!s.ok() && s.code() != StatusCode::kNotFound) {
      INFLIGHT_LOG_WARN("cancel of request {} failed: {}", handles_[p].id, s.to_string());
    }
  }
}

// ---- GenerationResult -----------------------------------------------------------------------

GenerationResult make_result(size_t num_prompts, int32_t n) {
  GenerationResult result;
  result.choices.resize(num_prompts * static_cast<size_t>(n));
  result.timings.resize(num_prompts);
  return result;
}

void add_output(GenerationResult& result, int32_t n, TaggedOutput& tagged) {
  RequestOutput& o = tagged.output;
  size_t index = tagged.prompt * static_cast<size_t>(n) + static_cast<size_t>(o.index);
  if (index < result.choices.size()) {
    ChoiceResult& c = result.choices[index];
    c.text += o.text;
    c.token_ids.insert(c.token_ids.end(), o.token_ids.begin(), o.token_ids.end());
    for (auto& lp : o.logprobs) c.logprobs.push_back(std::move(lp));
    for (auto& lp : o.prompt_logprobs) c.prompt_logprobs.push_back(std::move(lp));
    if (o.finish_reason) {
      c.finish_reason = o.finish_reason;
      c.stop_string = o.stop_string;
      c.stop_token_id = o.stop_token_id;
      c.error = o.error;
    }
  }
  if (o.request_finished) {
    result.usage.prompt_tokens += o.usage.prompt_tokens;
    result.usage.completion_tokens += o.usage.completion_tokens;
    result.usage.cached_prompt_tokens += o.usage.cached_prompt_tokens;
    result.timings[tagged.prompt] = o.timings;
  }
}

std::optional<ApiError> failed_choice_error(const GenerationResult& result) {
  for (const auto& c : result.choices) {
    if (c.finish_reason == FinishReason::kError) return engine_failure_error(c.error);
  }
  return std::nullopt;
}

}  // namespace inflight::frontend
