// Engine: in-flight batching over a paged KV cache, behind a thread-safe API.
//
//   auto engine = Engine::load({.path = "model.gguf"}, EngineConfig{});   // starts the loop
//   auto handle = engine.value()->enqueue(std::move(request));
//   std::vector<RequestOutput> outs;
//   while (!handle->stream->done()) handle->stream->wait_pop(outs, 100ms);
//   engine.value()->shutdown(ShutdownMode::kDrain);
//
// One thread runs the loop schedule -> forward -> sample -> update -> emit. Every public method
// may be called from any thread, never blocks on a model step (shutdown and the destructor
// excepted) and reports failure through Status, never an exception.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "inflight/config.h"
#include "inflight/output_stream.h"
#include "inflight/request.h"
#include "inflight/stats.h"
#include "inflight/status.h"

namespace inflight {

class ModelRunner;  // src/engine/model_runner.h: the model + backend + KV cache of one device
class Tokenizer;    // src/tokenizer/tokenizer.h

struct RequestHandle {
  RequestId id = 0;
  std::shared_ptr<OutputStream> stream;
};

enum class ShutdownMode {
  kDrain,  // refuse new requests, finish every accepted one, then stop
  kAbort,  // finish every request now with FinishReason::kAbort, then stop
};

class Engine {
 public:
  // Loads the model of `source` onto its device (its weights converted there from their stored
  // format), sizes the KV cache from `config` and the memory left, and starts the loop.
  // kNotFound / kInvalidArgument (a bad file, naming it), kUnsupported (an architecture or
  // device this build lacks), kResourceExhausted (it does not fit).
  static Result<std::unique_ptr<Engine>> load(const ModelSource& source,
                                              const EngineConfig& config = {});

  // Tensor parallelism (source.tensor_parallel_size > 1, one process per rank under mpirun):
  // rank 0 calls load(); every other rank calls run_worker(), which loads that rank's shard of
  // `source` and runs the steps rank 0's engine sends until that engine is destroyed. A failure
  // on any rank ends every rank with a message naming it.
  static Status run_worker(const ModelSource& source);
  // This process's rank in the parallel job mpirun launched it into (0 outside one). Initialises
  // MPI there: call it on the main thread, before load() or run_worker().
  static int join_parallel_job();
  // Outside mpirun: starts the tensor_parallel_size x pipeline_parallel_size - 1 other ranks of
  // `source` as processes running `command` (program and arguments), each of which must call
  // run_worker() with the same source; this process becomes rank 0 and then calls load().
  // kUnsupported when MPI cannot start them (Open MPI's orted missing from PATH).
  static Status start_workers(const ModelSource& source, const std::vector<std::string>& command);

  // Validates `config`, sizes and allocates the KV cache through `runner` and starts the loop.
  // `tokenizer` may be null: then prompts must be token ids, outputs carry no text and stop
  // strings are refused.
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config,
                                                std::unique_ptr<ModelRunner> runner,
                                                std::shared_ptr<const Tokenizer> tokenizer);
  // shutdown(kAbort) if still running.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and tokenizes on the caller's thread, then queues the request for the next step.
  // kInvalidArgument (bad parameters, empty prompt, token out of vocabulary),
  // kResourceExhausted (can never fit), kUnavailable (shutting down), kUnsupported.
  Result<RequestHandle> enqueue(Request request);

  // Compiles a structured-output constraint against this engine's vocabulary on the caller's
  // thread (cached: a request carrying it later reuses the result), so that a front end can
  // reject it before enqueue(). kInvalidArgument saying what is wrong with the schema, regex or
  // grammar; kUnsupported for an engine without a tokenizer.
  Status check_structured_output(const StructuredOutput& constraint);

  // The request finishes with FinishReason::kAbort and frees its KV blocks at the start of the
  // next step. kNotFound when no such request is live.
  Status cancel(RequestId id);

  EngineStats stats() const;

  // Stops the loop (see ShutdownMode) and joins its thread. Idempotent; later enqueues fail.
  void shutdown(ShutdownMode mode = ShutdownMode::kDrain);

  // The effective limits, after defaults were resolved against the model.
  const EngineConfig& config() const;
  int64_t vocab_size() const;
  // The tokenizer (null for token-id engines) and, after load(), the model's own chat template
  // (empty when it ships none) and what was loaded (path, or dummy architecture) and where.
  std::shared_ptr<const Tokenizer> tokenizer() const;
  const std::string& chat_template() const;
  const std::string& model_name() const;
  std::string device_name() const;

  class Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace inflight
