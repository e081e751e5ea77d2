// Generation: one client request inside the engine (one engine request per prompt), and the
// adapters that let the transport drive it: GenerationStream (a streamed body) and
// GenerationCollector (a deferred whole response).
//
// Lifetime: the transport owns the adapter, the adapter owns the Generation. Engine outputs
// arrive on the engine thread, which only fires `wake`; they are taken (try_pop) and
// formatted on the connection's strand. Cancelling, or dropping the Generation, cancels every
// engine request still running, so a client that leaves frees its KV blocks at the next step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "inflight/engine.h"
#include "server/http.h"
#include "server/server_context.h"

namespace inflight::server {

// An output tagged with the prompt it belongs to.
struct TaggedOutput {
  size_t prompt = 0;
  RequestOutput output;
};

class Generation {
 public:
  // Takes an in-flight slot (ApiError 429 when none is free), enqueues every request and
  // cancels those already queued if a later one fails (ApiError from the engine's Status).
  static std::shared_ptr<Generation> submit(ServerContext& ctx, std::vector<Request> requests);
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
  ServerContext& context() const { return ctx_; }

 private:
  struct Notifier {
    std::mutex mutex;
    std::function<void()> wake;
    bool fired = false;  // an output arrived before `wake` was set
    void notify();
  };
  Generation(ServerContext& ctx, std::shared_ptr<Engine> engine);

  ServerContext& ctx_;
  std::shared_ptr<Engine> engine_;
  std::shared_ptr<Notifier> notifier_;
  std::vector<RequestHandle> handles_;
  std::vector<bool> finished_;  // per prompt: its request_finished output was taken
  std::vector<RequestOutput> scratch_;
};

// Maps an engine Status to an ApiError: invalid argument / resource exhausted / unsupported
// 400, unavailable 503, not found 404, internal 500.
[[noreturn]] void throw_status(const Status& status);

// Turns outputs into body bytes, as they come.
class StreamFormatter {
 public:
  virtual ~StreamFormatter() = default;
  // Appends what this output adds to the stream (may be nothing).
  virtual void on_output(const TaggedOutput& output, std::string& out) = 0;
  // Appends the end of the stream (after every request finished).
  virtual void on_end(std::string& out) = 0;
};

class GenerationStream final : public StreamBody {
 public:
  GenerationStream(std::shared_ptr<Generation> generation,
                   std::unique_ptr<StreamFormatter> formatter, std::string prologue = {});
  void start(std::function<void()> wake) override;
  bool poll(std::string& out) override;
  void cancel() override;

 private:
  std::shared_ptr<Generation> generation_;
  std::unique_ptr<StreamFormatter> formatter_;
  std::string prologue_;  // sent with the first poll (e.g. the chat role chunks)
  std::vector<TaggedOutput> outputs_;
  bool done_ = false;
};

// One choice of a finished request, accumulated from its outputs.
struct ChoiceResult {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprob> logprobs;
  std::optional<FinishReason> finish_reason;
  std::string stop_string;
  std::optional<int32_t> stop_token_id;
  std::string error;
};

struct GenerationResult {
  // Choice `prompt * n + index`, as OpenAI numbers choices over several prompts.
  std::vector<ChoiceResult> choices;
  Usage usage;  // summed over prompts
  std::vector<RequestTimings> timings;  // per prompt
};

class GenerationCollector final : public DeferredResponse {
 public:
  using Render = std::function<HttpResponse(GenerationResult&)>;
  GenerationCollector(std::shared_ptr<Generation> generation, int32_t n, Render render);
  void start(std::function<void()> wake) override;
  std::optional<HttpResponse> poll() override;
  void cancel() override;

 private:
  std::shared_ptr<Generation> generation_;
  int32_t n_;
  Render render_;
  GenerationResult result_;
  std::vector<TaggedOutput> outputs_;
};

// The HTTP status for a choice that failed inside the engine, with its message; nullopt when
// every choice succeeded.
std::optional<HttpResponse> failed_choice_response(const GenerationResult& result);

}  // namespace inflight::server
