// Helpers for engine tests: engines on the CPU backend (tiny random-weight Llama or the real
// model) and collection of whole completions from output streams.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/tiny_llama.h"
#include "engine/llama_runner.h"
#include "inflight/engine.h"
#include "tokenizer/tokenizer.h"

namespace inflight::testing {

// Everything one request produced.
struct Completion {
  Status status;  // of enqueue()
  RequestId id = 0;
  std::vector<std::vector<int32_t>> tokens;         // [choice]
  std::vector<std::string> text;                    // [choice]
  std::vector<std::optional<FinishReason>> finish;  // [choice]
  std::vector<RequestOutput> outputs;               // in stream order
  RequestOutput last;                               // request_finished
};

// Tiny llama (vocab `vocab`, no EOS unless given) with fixed random weights.
inline ModelConfig tiny_model(int64_t vocab = 97, std::vector<int64_t> eos = {}) {
  ModelConfig c = tiny_config("llama");
  c.vocab_size = vocab;
  c.eos_token_ids = std::move(eos);
  return c;
}

inline std::unique_ptr<ModelRunner> tiny_runner(const ModelConfig& c) {
  static std::map<int64_t, LlamaModel::WeightMap> cache;  // by vocab: weights are slow to draw
  auto it = cache.find(c.vocab_size);
  if (it == cache.end()) it = cache.emplace(c.vocab_size, random_weights(c, 42)).first;
  return std::make_unique<LlamaRunner>(std::make_unique<CpuBackend>(), c, it->second);
}

inline std::unique_ptr<Engine> make_engine(const EngineConfig& config,
                                           std::unique_ptr<ModelRunner> runner,
                                           std::shared_ptr<const Tokenizer> tokenizer = nullptr) {
  auto engine = Engine::create(config, std::move(runner), std::move(tokenizer));
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return nullptr;
  return std::move(engine).value();
}

inline Completion collect(const RequestHandle& h, int32_t n,
                          std::chrono::seconds timeout = std::chrono::seconds(300)) {
  Completion c;
  c.id = h.id;
  c.tokens.resize(static_cast<size_t>(n));
  c.text.resize(static_cast<size_t>(n));
  c.finish.resize(static_cast<size_t>(n));
  const auto deadline = Clock::now() + timeout;
  while (!h.stream->done()) {
    if (Clock::now() > deadline) {
      ADD_FAILURE() << "request " << h.id << " did not finish in time";
      return c;
    }
    h.stream->wait_pop(c.outputs, std::chrono::milliseconds(50));
  }
  h.stream->try_pop(c.outputs);
  for (const RequestOutput& o : c.outputs) {
    const auto i = static_cast<size_t>(o.index);
    c.tokens[i].insert(c.tokens[i].end(), o.token_ids.begin(), o.token_ids.end());
    c.text[i] += o.text;
    if (o.finish_reason) c.finish[i] = o.finish_reason;
    if (o.request_finished) c.last = o;
  }
  return c;
}

// Enqueues every request at once, then waits for all.
inline std::vector<Completion> run_all(Engine& engine, const std::vector<Request>& requests) {
  std::vector<Completion> out(requests.size());
  std::vector<RequestHandle> handles(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto h = engine.enqueue(requests[i]);
    if (h.ok())
      handles[i] = h.value();
    else
      out[i].status = h.status();
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (handles[i].stream) out[i] = collect(handles[i], requests[i].sampling.n);
  }
  return out;
}

// Each request alone: enqueued only after the previous one finished.
inline std::vector<Completion> run_alone(Engine& engine, const std::vector<Request>& requests) {
  std::vector<Completion> out;
  for (const Request& r : requests) out.push_back(run_all(engine, {r})[0]);
  return out;
}

inline Request greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.prompt_token_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  return r;
}

}  // namespace inflight::testing
