// PyEngine: one engine with its front-end model (tokenizer, chat template, limits), as the
// Python package drives it. Plain C++: the binding (module.cc) releases the GIL around every
// call that may block and takes it only inside the callbacks it passes in.
//
// Two ways to run requests:
//   run_batch   offline: enqueue a batch, wait (on the calling thread) until every request has
//               finished, return whole completions (LLM.generate).
//   submit      asynchronous: the request's outputs are announced through ready_fd() (an eventfd
//               an asyncio loop watches) and taken with drain() on the loop's thread (AsyncLLM).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/generation.h"
#include "frontend/loaded_model.h"
#include "inflight/engine.h"
#include "ready_queue.h"

namespace inflight::python {

// One finished request of run_batch.
struct Completion {
  RequestId id = 0;
  std::vector<int32_t> prompt_token_ids;
  frontend::GenerationResult result;  // its n choices, usage, timings[0]
};

class PyEngine {
 public:
  // Engine::load, then the front end's view of it (chat template: `chat_template` source text,
  // or the model's own when empty). StatusError when it cannot start.
  PyEngine(const ModelSource& source, const EngineConfig& config, const std::string& chat_template);
  // shutdown(kAbort).
  ~PyEngine();
  PyEngine(const PyEngine&) = delete;
  PyEngine& operator=(const PyEngine&) = delete;

  const frontend::LoadedModel& model() const { return *model_; }
  Engine& engine() const { return *model_->engine; }
  // The tokenizer; StatusError(kUnsupported) for an engine without one (dummy weights).
  const Tokenizer& tokenizer() const;

  // The engine request of a prompt: text tokenized as the server does, the context length
  // checked (frontend::build_engine_request; ApiError 400 when the prompt leaves no room).
  Request make_request(const frontend::PromptInput& prompt, bool add_special_tokens,
                       const SamplingParams& sampling) const;

  // Runs `requests` to completion; results in input order. `poll(num_finished)` is called on
  // this thread after every wake-up (an output arrived, or at most kPollInterval passed); an
  // exception from it, or from enqueue, cancels every request still running and propagates.
  static constexpr std::chrono::milliseconds kPollInterval{50};
  std::vector<Completion> run_batch(std::vector<Request> requests,
                                    const std::function<void(size_t)>& poll);

  // Enqueues a request whose outputs are announced through ready_fd(); StatusError on refusal.
  RequestId submit(Request request);
  // Every output queued for submitted requests since the last drain, in order per request.
  // Requests whose stream has ended are forgotten.
  std::vector<RequestOutput> drain();
  int ready_fd() const { return ready_.fd(); }

  // The request finishes with FinishReason::kAbort at the next step; false when it is not live.
  bool cancel(RequestId id);
  void shutdown(ShutdownMode mode);

 private:
  static constexpr RequestId kAnyRequest = ~RequestId{0};  // a notify before its id was known

  std::shared_ptr<frontend::LoadedModel> model_;
  ReadyQueue ready_;
  std::mutex streams_mutex_;
  std::unordered_map<RequestId, std::shared_ptr<OutputStream>> streams_;  // submitted, live
};

}  // namespace inflight::python
