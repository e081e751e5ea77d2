#include "server/generation.h"

#include <fmt/format.h>

#include "core/logging.h"
#include "server/api_error.h"

namespace inflight::server {

void throw_status(const Status& status) {
  int http = 500;
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnsupported: http = 400; break;
    case StatusCode::kUnavailable: http = 503; break;
    case StatusCode::kNotFound: http = 404; break;
    default: http = 500; break;
  }
  throw ApiError(http, status.message());
}

// ---- Generation ------------------------------------------------------------------------------

void Generation::Notifier::notify() {
  std::lock_guard lock(mutex);
  if (wake) {
    wake();
  } else {
    fired = true;
  }
}

Generation::Generation(ServerContext& ctx, std::shared_ptr<Engine> engine)
    : ctx_(ctx), engine_(std::move(engine)), notifier_(std::make_shared<Notifier>()) {}

std::shared_ptr<Generation> Generation::submit(ServerContext& ctx, std::vector<Request> requests) {
  std::shared_ptr<Engine> engine = ctx.model().engine;
  if (!ctx.try_acquire_slot()) {
    throw ApiError(429, fmt::format("the server is at capacity ({} requests in flight); retry "
                                    "later",
                                    ctx.options().max_concurrent_requests));
  }
  // From here the destructor releases the slot and cancels what was queued.
  std::shared_ptr<Generation> g(new Generation(ctx, std::move(engine)));
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
  ctx_.release_slot();
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
      if (o.request_finished) finished_[p] = true;
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

// ---- GenerationStream -----------------------------------------------------------------------

GenerationStream::GenerationStream(std::shared_ptr<Generation> generation,
                                   std::unique_ptr<StreamFormatter> formatter,
                                   std::string prologue)
    : generation_(std::move(generation)), formatter_(std::move(formatter)),
      prologue_(std::move(prologue)) {}

void GenerationStream::start(std::function<void()> wake) { generation_->set_wake(std::move(wake)); }

bool GenerationStream::poll(std::string& out) {
  if (done_) return true;
  if (!prologue_.empty()) {
    out += prologue_;
    prologue_.clear();
  }
  outputs_.clear();
  bool finished = generation_->take(outputs_);
  int64_t tokens = 0;
  for (const auto& o : outputs_) {
    formatter_->on_output(o, out);
    tokens += static_cast<int64_t>(o.output.token_ids.size());
  }
  generation_->context().add_tokens_sent(tokens);
  if (finished) {
    formatter_->on_end(out);
    done_ = true;
  }
  return done_;
}

void GenerationStream::cancel() { generation_->cancel(); }

// ---- GenerationCollector --------------------------------------------------------------------

GenerationCollector::GenerationCollector(std::shared_ptr<Generation> generation, int32_t n,
                                         Render render)
    : generation_(std::move(generation)), n_(n), render_(std::move(render)) {
  result_.choices.resize(generation_->num_prompts() * static_cast<size_t>(n_));
  result_.timings.resize(generation_->num_prompts());
}

void GenerationCollector::start(std::function<void()> wake) {
  generation_->set_wake(std::move(wake));
}

std::optional<HttpResponse> GenerationCollector::poll() {
  if (!render_) return std::nullopt;  // already answered
  outputs_.clear();
  bool finished = generation_->take(outputs_);
  int64_t tokens = 0;
  for (auto& tagged : outputs_) {
    RequestOutput& o = tagged.output;
    size_t index = tagged.prompt * static_cast<size_t>(n_) + static_cast<size_t>(o.index);
    if (index < result_.choices.size()) {
      ChoiceResult& c = result_.choices[index];
      c.text += o.text;
      c.token_ids.insert(c.token_ids.end(), o.token_ids.begin(), o.token_ids.end());
      for (auto& lp : o.logprobs) c.logprobs.push_back(std::move(lp));
      if (o.finish_reason) {
        c.finish_reason = o.finish_reason;
        c.stop_string = o.stop_string;
        c.stop_token_id = o.stop_token_id;
        c.error = o.error;
      }
    }
    tokens += static_cast<int64_t>(o.token_ids.size());
    if (o.request_finished) {
      result_.usage.prompt_tokens += o.usage.prompt_tokens;
      result_.usage.completion_tokens += o.usage.completion_tokens;
      result_.usage.cached_prompt_tokens += o.usage.cached_prompt_tokens;
      result_.timings[tagged.prompt] = o.timings;
    }
  }
  generation_->context().add_tokens_sent(tokens);
  if (!finished) return std::nullopt;
  Render render = std::move(render_);
  render_ = nullptr;
  if (auto failed = failed_choice_response(result_)) return failed;
  return render(result_);
}

void GenerationCollector::cancel() { generation_->cancel(); }

std::optional<HttpResponse> failed_choice_response(const GenerationResult& result) {
  for (const auto& c : result.choices) {
    if (c.finish_reason == FinishReason::kError) {
      return error_response(500, c.error.empty() ? "generation failed" : c.error);
    }
  }
  return std::nullopt;
}

}  // namespace inflight::server
