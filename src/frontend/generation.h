// Generation: one client request inside the engine (one engine request per prompt), and what a
// transport makes of its outputs: stream events (StreamFormatter) or, once every choice has
// finished, a whole result (GenerationResult).
//
// Lifetime: the transport owns the Generation (through its own adapter). Engine outputs arrive
// on the engine thread, which only fires `wake`; they are taken (take) and formatted on the
// transport's thread. Cancelling, or dropping the Generation, cancels every engine request still
// running, so a client that leaves frees its KV blocks at the next step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/api_error.h"
#include "frontend/frontend.h"
#include "inflight/engine.h"

namespace inflight::frontend {

// An output tagged with the prompt it belongs to.
struct TaggedOutput {
  size_t prompt = 0;
  RequestOutput output;
};

class Generation {
 public:
  // Takes an in-flight slot (ApiError 429 when none is free), enqueues every request and
  // cancels those already queued if a later one fails (the engine's Status through
  // error_mapping.h).
  static std::shared_ptr<Generation> submit(Frontend& frontend, std::vector<Request> requests);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // `wake` is called (any thread) whenever outputs may be ready; set once, before polling.
  void set_wake(std::function<void()> wake);
  // Appends the outputs queued so far; returns true once every request has finished and all
  // its outputs were taken.
  bool take(std::vector<TaggedOutput>& out);
  // Cancels every engine request that has not finished. Idempotent.
  void cancel();

  size_t num_prompts() const { return handles_.size(); }
  Frontend& frontend() const { return frontend_; }
  // Usage summed over the prompts whose last output was taken, and the earliest of their
  // times to first token (0 when none produced a token): for the access log.
  const Usage& usage() const { return usage_; }
  double ttft_seconds() const { return ttft_s_; }

 private:
  struct Notifier {
    std::mutex mutex;
    std::function<void()> wake;
    bool fired = false;  // an output arrived before `wake` was set
    void notify();
  };
  Generation(Frontend& frontend, std::shared_ptr<Engine> engine);

  Frontend& frontend_;
  std::shared_ptr<const Frontend> keep_alive_;  // frontend_, when a shared_ptr owns it
  std::shared_ptr<Engine> engine_;
  std::shared_ptr<Notifier> notifier_;
  std::vector<RequestHandle> handles_;
  std::vector<bool> finished_;  // per prompt: its request_finished output was taken
  std::vector<RequestOutput> scratch_;
  Usage usage_;
  double ttft_s_ = 0.0;
};

// OpenAI's last stream event (the SSE transport sends it as `data: [DONE]`).
inline constexpr std::string_view kStreamDone = "[DONE]";

// Turns outputs into stream events, as they come. An event is the payload of one stream
// message: JSON text, or kStreamDone.
class StreamFormatter {
 public:
  virtual ~StreamFormatter() = default;
  // Appends the events this output adds to the stream (may be none).
  virtual void on_output(const TaggedOutput& output, std::vector<std::string>& events) = 0;
  // Appends the end of the stream (after every request finished).
  virtual void on_end(std::vector<std::string>& events) = 0;
};

// One choice of a finished request, accumulated from its outputs.
struct ChoiceResult {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprob> logprobs;
  // SamplingParams::prompt_logprobs: one per prompt token from the second on (choice 0 of each
  // prompt only).
  std::vector<TokenLogprob> prompt_logprobs;
  std::optional<FinishReason> finish_reason;
  std::string stop_string;
  std::optional<int32_t> stop_token_id;
  std::string error;
};

struct GenerationResult {
  // Choice `prompt * n + index`, as OpenAI numbers choices over several prompts.
  std::vector<ChoiceResult> choices;
  Usage usage;                          // summed over prompts
  std::vector<RequestTimings> timings;  // per prompt
};

// An empty result for `num_prompts` prompts of `n` choices each.
GenerationResult make_result(size_t num_prompts, int32_t n);
// Adds one output to a result made by make_result with the same `n`.
void add_output(GenerationResult& result, int32_t n, TaggedOutput& tagged);
// The error of a choice that failed inside the engine (engine_failure_error: a 500 whose detail
// is logged); nullopt when every choice succeeded.
std::optional<ApiError> failed_choice_error(const GenerationResult& result);

// A generation request the front end has accepted, for a transport to deliver: its engine
// requests run; a stream sends `prologue` then the formatter's events, a whole response is
// `render` of the result once every choice has finished (unless one failed).
struct StartedGeneration {
  std::shared_ptr<Generation> generation;
  int32_t n = 1;  // choices per prompt
  bool stream = false;
  std::vector<std::string> prologue;           // stream: events before any output
  std::unique_ptr<StreamFormatter> formatter;  // stream
  std::function<nlohmann::ordered_json(GenerationResult&)> render;  // whole response
};

}  // namespace inflight::frontend
