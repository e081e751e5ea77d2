// Helpers for engine tests: engines on a chosen backend (tiny random-weight Llama or the real
// model) and collection of whole completions from output streams.
//
// Device-parameterised suites run on "cpu" and "cuda"; the CUDA backend runs in its
// batch-invariant mode there (backend/cuda/cuda_backend.h), so that a request's tokens are
// bitwise the same alone and in any batch, as on the CPU. Without a CUDA device (or a CUDA
// build) the "cuda" instances skip.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "backend/tiny_llama.h"
#include "inflight/engine.h"
#include "model/registry.h"
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

// Whether tests can run on `device` here ("cpu" always).
inline bool device_available(const std::string& device) {
  return device == "cpu" || resolve_device("auto") != "cpu";
}

#define INFLIGHT_REQUIRE_DEVICE(device)                                    \
  do {                                                                     \
    if (!::inflight::testing::device_available(device)) {                  \
      std::printf("skipped: no %s device\n", std::string(device).c_str()); \
      GTEST_SKIP() << "skipped: no " << (device) << " device";             \
    }                                                                      \
  } while (0)

// The backend of device-parameterised tests: batch-invariant on CUDA.
inline std::unique_ptr<Backend> test_backend(const std::string& device) {
  BackendOptions options;
  options.batch_invariant = true;
  return make_backend(device, options);
}

inline std::unique_ptr<ModelRunner> tiny_runner(const ModelConfig& c,
                                                const std::string& device = "cpu",
                                                const RunnerOptions& options = {}) {
  static std::map<int64_t, WeightMap> cache;  // by vocab: weights are slow to draw
  auto it = cache.find(c.vocab_size);
  if (it == cache.end()) it = cache.emplace(c.vocab_size, random_weights(c, 42)).first;
  const WeightSource weights = weights_of(it->second);
  return make_runner(test_backend(device), c, &weights, 0, options);
}

// A ModelRunner that forwards every call to a real one: tests derive from it and override the
// calls they change (a step that fails, a step that waits).
class ForwardingRunner : public ModelRunner {
 public:
  explicit ForwardingRunner(std::unique_ptr<ModelRunner> real) : real_(std::move(real)) {}

  const ModelConfig& model_config() const override { return real_->model_config(); }
  std::string_view device_name() const override { return real_->device_name(); }
  void reserve_workspace(int32_t tokens, int32_t seqs) override {
    real_->reserve_workspace(tokens, seqs);
  }
  RunnerMemory memory() const override { return real_->memory(); }
  int64_t kv_bytes_per_block(int32_t bs) const override { return real_->kv_bytes_per_block(bs); }
  void init_kv_cache(int64_t n, int32_t bs) override { real_->init_kv_cache(n, bs); }
  bool asynchronous() const override { return real_->asynchronous(); }
  bool supports_token_masks() const override { return real_->supports_token_masks(); }
  int32_t max_steps_in_flight() const override { return real_->max_steps_in_flight(); }
  void begin_step(const ForwardBatch& batch, const LogitsRequest& request) override {
    real_->begin_step(batch, request);
  }
  StepLogits& end_step() override { return real_->end_step(); }

 private:
  std::unique_ptr<ModelRunner> real_;
};

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

// Small geometry for the tiny model: 4-token blocks, 64 sequences, 256 tokens per step.
inline EngineConfig small_config() {
  EngineConfig c;
  c.block_size = 4;
  c.num_kv_blocks = 512;
  c.max_num_seqs = 64;
  c.max_num_batched_tokens = 256;
  return c;
}

// 64 greedy requests of mixed lengths; many share prefixes.
inline std::vector<Request> mixed_requests(uint32_t seed, int count = 64) {
  std::mt19937 rng(seed);
  const auto base = random_tokens(40, 97, seed + 1);
  std::vector<Request> out;
  for (int i = 0; i < count; ++i) {
    const int32_t shared = static_cast<int32_t>(rng() % 24);
    const int32_t own = 1 + static_cast<int32_t>(rng() % 20);
    std::vector<int32_t> prompt(base.begin(), base.begin() + shared);
    const auto tail = random_tokens(own, 97, seed * 1000 + static_cast<uint32_t>(i));
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    out.push_back(greedy(prompt, 1 + static_cast<int32_t>(rng() % 12)));
  }
  return out;
}

inline void expect_same_tokens(const std::vector<Completion>& got,
                               const std::vector<Completion>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].status.ok())
        << what << " request " << i << ": " << got[i].status.to_string();
    EXPECT_EQ(got[i].tokens, want[i].tokens) << what << ": request " << i << " differs";
    EXPECT_EQ(got[i].finish, want[i].finish) << what << ": request " << i;
  }
}

}  // namespace inflight::testing
