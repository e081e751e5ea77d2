// Tensor parallelism on the CPU backend, run as every rank of an MPI job (`mpirun -np N`): each
// model sharded over the N ranks gives the logits of the same model on one rank (within fp32
// reduction-order rounding), the same candidates, and the same greedy continuations through the
// engine. Models: tiny random ones of each family (with a vocabulary the ranks split, and one
// they do not), the golden fixtures (safetensors and GGUF files, sliced at load) and SmolLM2
// (Q4_1 GGUF blocks sliced at load) where the rank count divides their heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend_factory.h"
#include "backend/tiny_llama.h"
#include "core/check.h"
#include "engine/engine_harness.h"
#include "formats/model_files.h"
#include "inflight/engine.h"
#include "model/pipeline_stage.h"
#include "model/registry.h"
#include "model/tensor_parallel.h"
#include "parallel/parallel_runner.h"
#include "parallel/world.h"

namespace inflight {
namespace {

using testing::make_step;
using testing::random_tokens;
using testing::RandomBlocks;
using testing::SeqState;

namespace fs = std::filesystem;

World& world() {
  return World::get();
}

// How the job's ranks split the model: tensor parallel size x pipeline stages.
struct Layout {
  int tp;
  int pp;
  std::string name() const { return "TP " + std::to_string(tp) + " x PP " + std::to_string(pp); }
};

// Every way this job's rank count splits a model: all tensor parallel, all pipeline, and
// TP 2 x PP 2 on 4 ranks.
std::vector<Layout> layouts() {
  const int n = world().size();
  std::vector<Layout> out = {{n, 1}, {1, n}};
  if (n == 4) out.push_back({2, 2});
  return out;
}

// Whether `layout` can split `c` (every rank decides alike: no collective is skipped on one rank
// only).
bool splits(const ModelConfig& c, const Layout& layout) {
  try {
    TensorParallelShard::of(c, 0, layout.tp);
    PipelineStage::of(c, 0, layout.pp);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// A model on one rank and the same model split over every rank of the job.
struct Pair {
  std::unique_ptr<DeviceRunner> whole;
  std::unique_ptr<DeviceRunner> shard;
};

Pair whole_and_shard(const ModelConfig& config, const WeightSource& weights, const Layout& layout) {
  Pair p;
  p.whole = make_runner(make_backend("cpu"), config, &weights);
  std::shared_ptr<Backend> backend = make_backend("cpu");
  const World::Groups groups = world().make_groups(*backend, layout.tp);
  p.shard = make_runner(backend, config, &weights, 0, {}, groups.tp, groups.pp);
  return p;
}

// Runs the same steps through both runners: two prompts in one step, a chunk, then decode steps
// fed with fixed tokens; asks for `top_k` candidates and every row whole. Rank 0 compares.
void expect_same_steps(Pair& p, const std::string& what, int32_t top_k) {
  const int64_t vocab = p.whole->model_config().vocab_size;
  constexpr int32_t kBlockSize = 4;
  for (DeviceRunner* r : {p.whole.get(), p.shard.get()}) r->init_kv_cache(32, kBlockSize);
  SeqState a{random_tokens(24, vocab, 1)}, b{random_tokens(24, vocab, 2)};
  RandomBlocks pool(32, 3);
  std::vector<ForwardBatch> steps;
  steps.push_back(make_step({{&a, 7}, {&b, 12}}, kBlockSize, pool));
  steps.push_back(make_step({{&a, 5}, {&b, 1}}, kBlockSize, pool));
  for (int i = 0; i < 6; ++i) steps.push_back(make_step({{&a, 1}, {&b, 1}}, kBlockSize, pool));
  for (size_t s = 0; s < steps.size(); ++s) {
    LogitsRequest request;
    request.top_k = top_k;
    const auto rows = static_cast<int32_t>(steps[s].logits_indices.size());
    for (int32_t r = 0; r < rows; ++r) request.full_rows.push_back(r);
    p.whole->begin_step(steps[s], request);
    StepLogits& want = p.whole->end_step();
    p.shard->begin_step(steps[s], request);
    StepLogits& got = p.shard->end_step();
    if (world().rank() != 0) continue;
    ASSERT_EQ(got.num_rows, rows);
    double max_err = 0.0;
    for (int32_t r = 0; r < rows; ++r) {
      const float* w = want.full.data<float>() + int64_t{r} * vocab;
      const float* g = got.full.data<float>() + int64_t{r} * vocab;
      for (int64_t i = 0; i < vocab; ++i) {
        max_err = std::max(max_err,
                           std::abs(double{g[i]} - w[i]) / std::max(1.0, std::abs(double{w[i]})));
      }
      EXPECT_NEAR(got.log_sum_exp.data<float>()[r], want.log_sum_exp.data<float>()[r], 1e-4)
          << what << " step " << s << " row " << r;
      for (int32_t j = 0; j < top_k; ++j) {
        const int64_t at = int64_t{r} * top_k + j;
        const float gv = got.top_logits.data<float>()[at], wv = want.top_logits.data<float>()[at];
        EXPECT_NEAR(gv, wv, 1e-4 * std::max(1.0f, std::abs(wv))) << what << " step " << s;
        // The same ids, unless two logits tie within the rounding of the sharded sums.
        const int32_t gi = got.top_ids.data<int32_t>()[at], wi = want.top_ids.data<int32_t>()[at];
        if (gi != wi) {
          EXPECT_NEAR(w[gi], w[wi], 1e-4 * std::max(1.0f, std::abs(wv)))
              << what << " step " << s << " row " << r << " candidate " << j;
        }
      }
    }
    EXPECT_LT(max_err, 1e-4) << what << " step " << s;
  }
}

// Tiny random models of each family, shaped so that 2, 3 and 4 ranks can split them.
ModelConfig splittable(const std::string& arch, int64_t vocab) {
  ModelConfig c = testing::tiny_config(arch);
  c.num_heads = 12;    // 2, 3, 4 divide it
  c.num_kv_heads = 2;  // split on 2 ranks, one per rank (replicated) on 4; 3 on 3 ranks
  c.intermediate_size = 96;
  if (arch == "mixtral") c.intermediate_size = 24;
  if (arch == "qwen3_moe") c.moe_intermediate_size = 36;
  c.num_layers = 4;      // up to 4 pipeline stages
  c.vocab_size = vocab;  // 96: split by every rank count here; 97: replicated
  if (world().size() == 3) c.num_kv_heads = 3;      // 3 ranks: one KV head each
  if (arch == "mpt") c.num_kv_heads = c.num_heads;  // multi-head; ALiBi slopes of global heads
  return c;
}

class TensorParallelFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallelFamilies, ShardsGiveTheLogitsOfTheWholeModel) {
  for (const int64_t vocab : {96, 97}) {
    const ModelConfig c = splittable(GetParam(), vocab);
    const WeightMap weights = testing::random_weights(c, 7);
    const WeightSource source = weights_of(weights);
    for (const Layout& layout : layouts()) {
      if (!splits(c, layout)) continue;
      const std::string what = GetParam() + " vocab " + std::to_string(vocab) + " " + layout.name();
      // Candidates fewer than, and more than, one rank's vocabulary columns.
      Pair p = whole_and_shard(c, source, layout);
      expect_same_steps(p, what, 5);
      Pair q = whole_and_shard(c, source, layout);
      expect_same_steps(q, what + " top-40", 40);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, TensorParallelFamilies,
                         ::testing::Values("llama", "qwen2", "qwen3", "mixtral", "qwen3_moe",
                                           "mpt"));

// Dummy weights: each rank fills its slices with the values the whole model has there
// (model/llama.h), so the shards give the whole model's logits; MPT's biases are column- and
// row-parallel (the latter on rank 0 only) and its ALiBi slopes those of the global heads.
TEST(TensorParallelDummy, ShardsOfDummyWeightsGiveTheLogitsOfTheWholeModel) {
  for (const char* arch : {"llama", "mpt"}) {
    const ModelConfig c = splittable(arch, 96);
    for (const Layout& layout : layouts()) {
      if (!splits(c, layout)) continue;
      Pair p;
      p.whole = make_runner(make_backend("cpu"), c, nullptr, /*seed=*/5);
      std::shared_ptr<Backend> backend = make_backend("cpu");
      const World::Groups groups = world().make_groups(*backend, layout.tp);
      p.shard = make_runner(backend, c, nullptr, /*seed=*/5, {}, groups.tp, groups.pp);
      expect_same_steps(p, std::string(arch) + " dummy " + layout.name(), 5);
    }
  }
}

// Models from files: each rank loads slices of the stored tensors.
TEST(TensorParallelFiles, GoldenFixturesAndSmolLM2) {
  std::vector<fs::path> paths;
  const fs::path fixtures = fs::path(INFLIGHT_SOURCE_DIR) / "tests" / "golden" / "fixtures";
  for (const char* name :
       {"tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3.gguf", "tiny-mixtral",
        "tiny-mixtral.gguf", "tiny-qwen3-moe.gguf", "tiny-mpt", "tiny-mpt.gguf", "tiny-mpt-bias"}) {
    paths.push_back(fixtures / name);
  }
  if (fs::exists(INFLIGHT_TEST_MODEL)) paths.emplace_back(INFLIGHT_TEST_MODEL);
  int tested = 0;
  for (const fs::path& path : paths) {
    const std::unique_ptr<ModelFiles> files = ModelFiles::open(path.string());
    const ModelConfig config = resolve_architecture(files->config());
    const WeightSource weights = weights_of(*files);
    for (const Layout& layout : layouts()) {
      if (!splits(config, layout)) continue;
      Pair p = whole_and_shard(config, weights, layout);
      expect_same_steps(p, path.filename().string() + " " + layout.name(), 8);
      ++tested;
    }
  }
  if (tested == 0) GTEST_SKIP() << "skipped: " << world().size() << " ranks split none of them";
}

// Counts the steps in flight at once (begun, not yet ended) through the runner it wraps.
class PeakInFlight final : public testing::ForwardingRunner {
 public:
  PeakInFlight(std::unique_ptr<ModelRunner> real, int32_t& peak)
      : ForwardingRunner(std::move(real)), peak_(peak) {}
  void begin_step(const ForwardBatch& batch, const LogitsRequest& request) override {
    ForwardingRunner::begin_step(batch, request);
    peak_ = std::max(peak_, ++in_flight_);
  }
  StepLogits& end_step() override {
    --in_flight_;
    return ForwardingRunner::end_step();
  }

 private:
  int32_t& peak_;
  int32_t in_flight_ = 0;
};

// Holds the engine's first step until open(): requests enqueued meanwhile all run while the
// first one still does, however the threads are scheduled (the first cannot finish alone).
class HeldFirstStep final : public testing::ForwardingRunner {
 public:
  explicit HeldFirstStep(std::unique_ptr<ModelRunner> real) : ForwardingRunner(std::move(real)) {}
  void open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }
  void begin_step(const ForwardBatch& batch, const LogitsRequest& request) override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      opened_.wait(lock, [&] { return open_; });
    }
    ForwardingRunner::begin_step(batch, request);
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

// Runs `generate` on rank 0 over a ParallelRunner of this job (rank 0's shard; the other ranks
// serve its steps until it is destroyed). Every rank calls it.
template <typename F>
void on_ranks(const ModelConfig& c, const WeightSource& source, const Layout& layout,
              F&& generate) {
  std::shared_ptr<Backend> backend = make_backend("cpu");
  const World::Groups groups = world().make_groups(*backend, layout.tp);
  std::unique_ptr<DeviceRunner> shard =
      make_runner(backend, c, &source, 0, {}, groups.tp, groups.pp);
  if (world().rank() != 0) {
    serve_steps(*shard, world());
    return;
  }
  generate(std::make_unique<ParallelRunner>(std::move(shard), world()));
}

// The engine over a ParallelRunner on rank 0, the other ranks serving its steps: the
// continuations of the same model on one rank (greedy, and seeded sampling), with the prompts
// in chunks, with a KV cache so small that requests are preempted and recomputed, and each
// request alone (batch invariance). Over pipeline stages one micro-batch per stage is in flight
// (the default), or one step at a time when asked.
TEST(TensorParallelEngine, ContinuationsMatchOneRank) {
  const ModelConfig c = splittable("llama", 96);
  const WeightMap weights = testing::random_weights(c, 11);
  const WeightSource source = weights_of(weights);
  auto make_requests = [&](bool seeded) {
    std::vector<Request> requests(3);
    for (uint32_t i = 0; i < 3; ++i) {
      requests[i].prompt_token_ids = random_tokens(5 + 9 * i, c.vocab_size, 100 + i);
      requests[i].sampling.temperature = seeded ? 0.8f : 0.0f;
      requests[i].sampling.top_p = seeded ? 0.9f : 1.0f;
      if (seeded) requests[i].sampling.seed = 1000 + i;
      requests[i].sampling.max_tokens = 24;
      requests[i].sampling.ignore_eos = true;
    }
    return requests;
  };
  struct Case {
    const char* name;
    int64_t kv_blocks;  // of 16 tokens; the three requests need 7 at once
    bool alone;
    bool seeded;
    int32_t micro_batches;  // EngineConfig::max_num_micro_batches (0: one per stage)
  };
  for (const Layout& layout : layouts()) {
    if (!splits(c, layout)) continue;
    for (const Case k :
         {Case{"together", 64, false, false, 0}, Case{"seeded", 64, false, true, 0},
          Case{"preempted", 4, false, false, 0}, Case{"preempted seeded", 4, false, true, 0},
          Case{"alone", 64, true, false, 0}, Case{"one step at a time", 64, false, false, 1}}) {
      const std::string what = layout.name() + " " + k.name;
      EngineConfig config;
      config.max_num_seqs = 4;
      config.max_num_batched_tokens = 16;  // prompts in chunks
      config.num_kv_blocks = k.kv_blocks;
      config.schedule_conservativeness = 0;  // optimistic admission: 4 blocks must preempt
      config.max_num_micro_batches = k.micro_batches;
      const std::vector<Request> requests = make_requests(k.seeded);
      on_ranks(c, source, layout, [&](std::unique_ptr<ModelRunner> parallel) {
        // With micro-batches in flight which sequences share the cache at once depends on when
        // each step ends, so whether 4 blocks must preempt is known for one step at a time only.
        auto generate = [&](std::unique_ptr<ModelRunner> runner, bool steps_in_flight) {
          auto held = std::make_unique<HeldFirstStep>(std::move(runner));
          HeldFirstStep& gate = *held;
          std::unique_ptr<Engine> engine = testing::make_engine(config, std::move(held));
          std::vector<testing::Completion> out;
          if (k.alone) {
            gate.open();
            out = testing::run_alone(*engine, requests);
          } else {
            std::vector<RequestHandle> handles;
            for (const Request& r : requests) handles.push_back(engine->enqueue(r).value());
            gate.open();
            for (const RequestHandle& h : handles) out.push_back(testing::collect(h, 1));
          }
          if (!steps_in_flight) {
            EXPECT_EQ(engine->stats().num_preemptions > 0, k.kv_blocks < 7) << what;
          }
          return out;
        };
        config.max_num_micro_batches = 0;  // one rank: one step at a time
        const auto want = generate(make_runner(make_backend("cpu"), c, &source), false);
        config.max_num_micro_batches = k.micro_batches;
        int32_t peak = 0;
        const auto got = generate(std::make_unique<PeakInFlight>(std::move(parallel), peak),
                                  layout.pp > 1 && k.micro_batches != 1);
        for (size_t i = 0; i < requests.size(); ++i) {
          ASSERT_EQ(want[i].tokens[0].size(), 24u) << what;
          EXPECT_EQ(got[i].tokens[0], want[i].tokens[0]) << what << " request " << i;
        }
        // Three requests keep up to three micro-batches busy (one stage each: a micro-batch
        // takes ceil(3 / stages) of them); alone, one sequence is in one step at a time.
        const int32_t most = k.micro_batches == 1 || k.alone ? 1 : std::min(layout.pp, 3);
        if (k.kv_blocks >= 7) EXPECT_EQ(peak, most) << what << ": steps in flight at once";
      });
    }
  }
}

// The golden fixtures and SmolLM2 through the engine, split over this job's ranks in every way
// that splits them: the greedy continuations of 32 tokens of one rank. A fork where the one-rank
// run's two best candidates tie within the rounding of the sharded sums (fp32) is reported, and
// that request compared no further.
TEST(TensorParallelEngine, GreedyContinuationsOfTheFileModelsMatchOneRank) {
  constexpr int32_t kTokens = 32;
  const fs::path fixtures = fs::path(INFLIGHT_SOURCE_DIR) / "tests" / "golden" / "fixtures";
  std::vector<fs::path> paths;
  for (const char* name : {"tiny-llama", "tiny-qwen3.gguf", "tiny-mixtral", "tiny-qwen3-moe.gguf",
                           "tiny-mpt", "tiny-mpt-bias"}) {
    paths.push_back(fixtures / name);
  }
  if (fs::exists(INFLIGHT_TEST_MODEL)) paths.emplace_back(INFLIGHT_TEST_MODEL);
  int tested = 0;
  for (const fs::path& path : paths) {
    const std::unique_ptr<ModelFiles> files = ModelFiles::open(path.string());
    const ModelConfig c = resolve_architecture(files->config());
    const WeightSource source = weights_of(*files);
    std::vector<Request> requests(2);
    for (uint32_t i = 0; i < requests.size(); ++i) {
      requests[i].prompt_token_ids = random_tokens(6 + 11 * i, c.vocab_size, 300 + i);
      requests[i].sampling.temperature = 0.0f;
      requests[i].sampling.logprobs = 2;  // the two best candidates of each step, for ties
      requests[i].sampling.max_tokens = kTokens;
      requests[i].sampling.ignore_eos = true;
    }
    EngineConfig config;
    config.max_num_seqs = 4;
    config.num_kv_blocks = 16;
    for (const Layout& layout : layouts()) {
      if (!splits(c, layout)) continue;
      ++tested;
      const std::string what = path.filename().string() + " " + layout.name();
      on_ranks(c, source, layout, [&](std::unique_ptr<ModelRunner> parallel) {
        auto generate = [&](std::unique_ptr<ModelRunner> runner) {
          std::unique_ptr<Engine> engine = testing::make_engine(config, std::move(runner));
          return testing::run_all(*engine, requests);
        };
        const auto want = generate(make_runner(make_backend("cpu"), c, &source));
        const auto got = generate(std::move(parallel));
        for (size_t i = 0; i < requests.size(); ++i) {
          const std::vector<int32_t>& w = want[i].tokens[0];
          const std::vector<int32_t>& g = got[i].tokens[0];
          ASSERT_EQ(w.size(), size_t{kTokens}) << what;
          ASSERT_EQ(g.size(), size_t{kTokens}) << what;
          std::vector<TokenLogprob> steps;  // the one-rank run's, one per token
          for (const RequestOutput& o : want[i].outputs) {
            steps.insert(steps.end(), o.logprobs.begin(), o.logprobs.end());
          }
          ASSERT_EQ(steps.size(), size_t{kTokens}) << what;
          const auto fork = std::mismatch(w.begin(), w.end(), g.begin()).first - w.begin();
          if (fork == kTokens) continue;
          const TokenLogprob& at = steps[static_cast<size_t>(fork)];
          ASSERT_GE(at.top.size(), 2u) << what;
          const float gap = at.top[0].second - at.top[1].second;
          EXPECT_LT(gap, 1e-4f) << what << " request " << i << " forks at token " << fork
                                << " without a tie";
          std::printf("%s request %zu: a tie at token %td (gap %.2g), compared up to it\n",
                      what.c_str(), i, fork, gap);
        }
      });
    }
  }
  if (tested == 0) GTEST_SKIP() << "skipped: " << world().size() << " ranks split none of them";
}

// More micro-batches than pipeline stages are refused at start, naming the field and the limit.
TEST(TensorParallelEngine, MoreMicroBatchesThanStagesAreRefused) {
  const ModelConfig c = splittable("llama", 96);
  const WeightMap weights = testing::random_weights(c, 11);
  const WeightSource source = weights_of(weights);
  EngineConfig config;
  config.max_num_seqs = 4;
  config.num_kv_blocks = 16;
  for (const Layout& layout : layouts()) {
    if (!splits(c, layout)) continue;
    on_ranks(c, source, layout, [&](std::unique_ptr<ModelRunner> parallel) {
      config.max_num_micro_batches = layout.pp + 1;
      const auto engine = Engine::create(config, std::move(parallel), nullptr);
      ASSERT_FALSE(engine.ok()) << layout.name();
      EXPECT_EQ(engine.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(engine.status().message().find(
                    fmt::format("max_num_micro_batches = {} is more than the model's pipeline "
                                "stages ({})",
                                layout.pp + 1, layout.pp)),
                std::string::npos)
          << engine.status().message();
    });
  }
}

// Many requests with shared prefixes (prefix-cache hits), in chunks, over the pipeline with its
// micro-batches: every request's tokens are those it gets alone on one rank.
TEST(TensorParallelEngine, MixedRequestsMatchEachAloneOnOneRank) {
  const ModelConfig c = splittable("llama", 97);
  const WeightMap weights = testing::random_weights(c, 13);
  const WeightSource source = weights_of(weights);
  const std::vector<Request> requests = testing::mixed_requests(5, 24);
  EngineConfig config = testing::small_config();
  config.max_num_batched_tokens = 24;  // chunks
  config.max_model_len = 128;
  for (const Layout& layout : layouts()) {
    if (!splits(c, layout)) continue;
    on_ranks(c, source, layout, [&](std::unique_ptr<ModelRunner> parallel) {
      std::unique_ptr<Engine> one =
          testing::make_engine(config, make_runner(make_backend("cpu"), c, &source));
      const auto want = testing::run_alone(*one, requests);
      std::unique_ptr<Engine> engine = testing::make_engine(config, std::move(parallel));
      const auto got = testing::run_all(*engine, requests);
      testing::expect_same_tokens(got, want, layout.name());
      EXPECT_GT(engine->stats().num_prefix_cache_hits, 0u) << layout.name();
    });
  }
}

// Requests cancelled while their steps are in flight: the others' tokens are unchanged, every
// KV block comes back (the engine checks it when idle, and serves the next request), and an
// engine shut down with steps in flight ends them before it stops the ranks.
TEST(TensorParallelEngine, CancelledInFlightAndShutDownMidFlight) {
  const ModelConfig c = splittable("llama", 96);
  const WeightMap weights = testing::random_weights(c, 17);
  const WeightSource source = weights_of(weights);
  std::vector<Request> requests(6);
  for (uint32_t i = 0; i < requests.size(); ++i) {
    requests[i] = testing::greedy(random_tokens(4 + 3 * i, c.vocab_size, 200 + i), 160);
    requests[i].sampling.ignore_eos = true;
  }
  EngineConfig config;
  config.max_num_seqs = 8;
  config.max_num_batched_tokens = 16;
  config.num_kv_blocks = 128;
  config.max_model_len = 256;
  for (const Layout& layout : layouts()) {
    if (!splits(c, layout)) continue;
    const std::string what = layout.name();
    on_ranks(c, source, layout, [&](std::unique_ptr<ModelRunner> parallel) {
      std::unique_ptr<Engine> one =
          testing::make_engine(config, make_runner(make_backend("cpu"), c, &source));
      const auto want = testing::run_all(*one, requests);
      std::unique_ptr<Engine> engine = testing::make_engine(config, std::move(parallel));
      std::vector<RequestHandle> handles;
      for (const Request& r : requests) handles.push_back(engine->enqueue(r).value());
      // Odd requests are cancelled once they have a few tokens, while the others run.
      for (size_t i = 1; i < handles.size(); i += 2) {
        std::vector<RequestOutput> seen;
        size_t tokens = 0;
        while (tokens < 4 && !handles[i].stream->done()) {
          handles[i].stream->wait_pop(seen, std::chrono::milliseconds(20));
          tokens = 0;
          for (const RequestOutput& o : seen) tokens += o.token_ids.size();
        }
        ASSERT_TRUE(engine->cancel(handles[i].id).ok()) << what;
      }
      for (size_t i = 0; i < handles.size(); ++i) {
        const testing::Completion got = testing::collect(handles[i], 1);
        if (i % 2 == 0) {
          EXPECT_EQ(got.tokens[0], want[i].tokens[0]) << what << " request " << i;
        } else {
          EXPECT_EQ(got.finish[0], FinishReason::kAbort) << what << " request " << i;
        }
      }
      // Idle again: every block is back (or the loop would have stopped and refused this).
      const auto again = testing::run_all(*engine, {requests[0]});
      ASSERT_TRUE(again[0].status.ok()) << what << ": " << again[0].status.to_string();
      EXPECT_EQ(again[0].tokens[0], want[0].tokens[0]) << what;
      const EngineStats stats = engine->stats();
      EXPECT_EQ(stats.num_free_kv_blocks, stats.num_kv_blocks) << what;
      // Shut down while requests run: the steps in flight end, then the ranks stop.
      for (const Request& r : requests) handles.push_back(engine->enqueue(r).value());
      std::vector<RequestOutput> seen;
      while (seen.empty()) handles.back().stream->wait_pop(seen, std::chrono::milliseconds(20));
      engine->shutdown(ShutdownMode::kAbort);
      EXPECT_EQ(testing::collect(handles.back(), 1).finish[0], FinishReason::kAbort) << what;
    });
  }
}

// The memory plan of a parallel job takes the smallest free memory of any rank (and the largest
// KV block): World::min_over_ranks gives every rank the least value of all.
TEST(WorldControlMessages, MinOverRanksGivesEveryRankTheLeastValue) {
  const int64_t mine = (int64_t{1} << 40) - 1000 * world().rank();
  EXPECT_EQ(world().min_over_ranks(mine), (int64_t{1} << 40) - 1000 * (world().size() - 1));
  EXPECT_EQ(-world().min_over_ranks(-mine), int64_t{1} << 40);
}

TEST(WorldControlMessages, AllGatherGivesEveryRankEveryTextInRankOrder) {
  const int r = world().rank();
  std::vector<std::string> expected;  // of every length, the empty one included
  for (int q = 0; q < world().size(); ++q) expected.push_back(std::string(q * 3, 'a' + q));
  EXPECT_EQ(world().all_gather(expected[static_cast<size_t>(r)]), expected);
}

TEST(WorldControlMessages, NoRankOfARunningJobIsGone) {
  EXPECT_TRUE(world().gone_ranks().empty());  // every process of this job runs this test
}

// Control messages reach the ranks while rank 0 makes no MPI call (as while it waits on its
// device for a step whose other stages need a later step's message): rank 0 posts messages of
// 8 MiB, larger than any eager limit, then only watches the file system for the ranks' receipts.
TEST(WorldControlMessages, ReachTheRanksWhileRankZeroMakesNoMpiCall) {
  const int kMessages = 3;
  const size_t kBytes = size_t{8} << 20;
  const auto contents = [&](int m) {
    std::vector<uint8_t> bytes(kBytes);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + m);
    return bytes;
  };
  if (world().rank() != 0) {
    const std::vector<uint8_t> dir = world().receive_from_root();
    int good = 0;
    for (int m = 0; m < kMessages; ++m) good += world().receive_from_root() == contents(m);
    // Written aside, then renamed: rank 0 counts the receipts as they appear, whole.
    const fs::path receipt =
        fs::path(std::string(dir.begin(), dir.end())) / ("rank" + std::to_string(world().rank()));
    std::ofstream(receipt.string() + ".part") << good;
    fs::rename(receipt.string() + ".part", receipt);
    world().min_over_ranks(0);
    return;
  }
  const fs::path dir =
      fs::temp_directory_path() /
      ("inflight_world_" +
       std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  fs::create_directories(dir);
  const std::string name = dir.string();
  world().send_to_all(std::vector<uint8_t>(name.begin(), name.end()));
  for (int m = 0; m < kMessages; ++m) world().post_to_all(contents(m));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int receipts = 0;
  while (receipts < world().size() - 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    receipts = 0;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      receipts += e.path().extension() != ".part";
    }
  }
  ASSERT_EQ(receipts, world().size() - 1)
      << "the ranks did not receive the messages while rank 0 made no MPI call";
  for (int r = 1; r < world().size(); ++r) {
    std::ifstream in(dir / ("rank" + std::to_string(r)));
    int good = 0;
    in >> good;
    EXPECT_EQ(good, kMessages) << "rank " << r << " received other bytes";
  }
  world().wait_posted();
  world().min_over_ranks(0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace inflight
