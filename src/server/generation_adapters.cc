#include "server/generation_adapters.h"

#include <fmt/format.h>

#include "server/http_responses.h"
#include "server/sse.h"

namespace inflight::server {

// ---- GenerationStream -----------------------------------------------------------------------

GenerationStream::GenerationStream(std::shared_ptr<frontend::Generation> generation,
                                   std::unique_ptr<frontend::StreamFormatter> formatter,
                                   std::vector<std::string> prologue)
    : generation_(std::move(generation)),
      formatter_(std::move(formatter)),
      prologue_(std::move(prologue)) {}

void GenerationStream::start(std::function<void()> wake) {
  generation_->set_wake(std::move(wake));
}

bool GenerationStream::poll(std::string& out) {
  if (done_) return true;
  events_.clear();
  events_.swap(prologue_);  // the prologue goes with the first poll
  outputs_.clear();
  bool finished = generation_->take(outputs_);
  int64_t tokens = 0;
  for (const auto& o : outputs_) {
    formatter_->on_output(o, events_);
    tokens += static_cast<int64_t>(o.output.token_ids.size());
  }
  generation_->frontend().add_tokens_sent(tokens);
  if (finished) {
    formatter_->on_end(events_);
    done_ = true;
  }
  for (const auto& event : events_) append_sse_event(out, event);
  return done_;
}

void GenerationStream::abort() {
  generation_->cancel();
}

void GenerationStream::cancel() {
  generation_->cancel();
}

// ---- GenerationCollector --------------------------------------------------------------------

GenerationCollector::GenerationCollector(std::shared_ptr<frontend::Generation> generation,
                                         int32_t n, Render render)
    : generation_(std::move(generation)),
      n_(n),
      render_(std::move(render)),
      result_(frontend::make_result(generation_->num_prompts(), n)) {}

void GenerationCollector::start(std::function<void()> wake) {
  generation_->set_wake(std::move(wake));
}

std::optional<HttpResponse> GenerationCollector::poll() {
  if (!render_) return std::nullopt;  // already answered
  outputs_.clear();
  bool finished = generation_->take(outputs_);
  int64_t tokens = 0;
  for (auto& tagged : outputs_) {
    frontend::add_output(result_, n_, tagged);
    tokens += static_cast<int64_t>(tagged.output.token_ids.size());
  }
  generation_->frontend().add_tokens_sent(tokens);
  if (!finished) return std::nullopt;
  Render render = std::move(render_);
  render_ = nullptr;
  if (auto failed = frontend::failed_choice_error(result_)) return error_response(*failed);
  return json_response(render(result_));
}

void GenerationCollector::cancel() {
  generation_->cancel();
}

namespace {

// "prompt_tokens=12 completion_tokens=20 ttft=5.1ms" (the generation outlives the response).
std::function<std::string()> usage_details(std::shared_ptr<frontend::Generation> generation) {
  return [generation = std::move(generation)] {
    const Usage& u = generation->usage();
    return fmt::format("prompt_tokens={} completion_tokens={} cached_tokens={} ttft={:.1f}ms",
                       u.prompt_tokens, u.completion_tokens, u.cached_prompt_tokens,
                       generation->ttft_seconds() * 1e3);
  };
}

}  // namespace

HttpResponse generation_response(frontend::StartedGeneration started) {
  auto details = usage_details(started.generation);
  HttpResponse res;
  if (started.stream) {
    res = sse_response(std::make_shared<GenerationStream>(
        std::move(started.generation), std::move(started.formatter), std::move(started.prologue)));
  } else {
    res.deferred = std::make_shared<GenerationCollector>(std::move(started.generation), started.n,
                                                         std::move(started.render));
  }
  res.log_details = std::move(details);
  return res;
}

}  // namespace inflight::server
