// The engine's serving paths on every device ("cpu", "cuda"; the CUDA instances skip without a
// device): sampling from candidates selected on the device gives the tokens and logprobs of
// sampling from whole rows; decode steps padded to graph buckets, and replayed as graphs, give
// the tokens of plain steps; dummy weights stay finite through many layers.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "engine_harness.h"
#include "model/arch_presets.h"

namespace inflight::testing {
namespace {

class DeviceEngine : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { INFLIGHT_REQUIRE_DEVICE(GetParam()); }
  std::unique_ptr<ModelRunner> runner(GraphMode mode = GraphMode::kCapture) const {
    RunnerOptions options;
    options.graph_mode = mode;
    return tiny_runner(tiny_model(), GetParam(), options);
  }
};

INSTANTIATE_TEST_SUITE_P(Devices, DeviceEngine, ::testing::Values("cpu", "cuda"));

// Every sampling path: candidates (greedy, logprobs, top-k with temperature, min-p and top-p,
// choices) and whole rows (penalties, full-vocabulary sampling, suppressed stop tokens), mixed
// in one batch.
std::vector<Request> sampling_requests() {
  std::vector<Request> out = mixed_requests(11, 32);
  for (size_t i = 0; i < out.size(); ++i) {
    SamplingParams& p = out[i].sampling;
    p.seed = 1000 + i;
    p.max_tokens = 6 + static_cast<int32_t>(i % 5);
    switch (i % 8) {
      case 0:
        break;  // greedy
      case 1:
        p.logprobs = 5;
        break;
      case 2:
        p.temperature = 0.8f;
        p.top_k = 20;
        break;
      case 3:
        p.temperature = 1.3f;
        p.top_k = 40;
        p.top_p = 0.9f;
        p.min_p = 0.05f;
        p.logprobs = 3;
        break;
      case 4:
        p.temperature = 1.0f;
        p.top_k = 5;
        p.n = 2;
        break;
      case 5:
        p.temperature = 0.7f;
        p.top_k = 10;
        p.repetition_penalty = 1.2f;
        break;
      case 6:
        p.temperature = 1.0f;
        p.top_p = 0.8f;
        break;
      default:
        p.min_tokens = 3;
        p.stop_token_ids = {1, 2, 3};
        break;
    }
  }
  return out;
}

void expect_same_outputs(const std::vector<Completion>& got, const std::vector<Completion>& want) {
  expect_same_tokens(got, want, "device sampling");
  for (size_t i = 0; i < got.size(); ++i) {
    std::vector<TokenLogprob> a, b;
    for (const auto& o : got[i].outputs) a.insert(a.end(), o.logprobs.begin(), o.logprobs.end());
    for (const auto& o : want[i].outputs) b.insert(b.end(), o.logprobs.begin(), o.logprobs.end());
    ASSERT_EQ(a.size(), b.size()) << "request " << i;
    for (size_t t = 0; t < a.size(); ++t) {
      EXPECT_EQ(a[t].token_id, b[t].token_id);
      EXPECT_NEAR(a[t].logprob, b[t].logprob, 1e-4) << "request " << i << " token " << t;
      ASSERT_EQ(a[t].top.size(), b[t].top.size());
      for (size_t k = 0; k < a[t].top.size(); ++k) {
        EXPECT_EQ(a[t].top[k].first, b[t].top[k].first) << "request " << i << " token " << t;
        EXPECT_NEAR(a[t].top[k].second, b[t].top[k].second, 1e-4);
      }
    }
  }
}

TEST_P(DeviceEngine, SamplingFromDeviceCandidatesMatchesWholeRows) {
  const auto requests = sampling_requests();
  EngineConfig c = small_config();
  c.device_sampling = false;
  const auto whole_rows = run_all(*make_engine(c, runner()), requests);
  c.device_sampling = true;
  const auto candidates = run_all(*make_engine(c, runner()), requests);
  expect_same_outputs(candidates, whole_rows);
  size_t sampled_differently = 0;  // the sampled requests really sampled
  for (size_t i = 0; i < requests.size(); ++i) {
    if (i % 8 == 2 || i % 8 == 3) {
      Request greedy_twin = requests[i];
      greedy_twin.sampling.temperature = 0.0f;
      const auto g = run_all(*make_engine(c, runner()), {greedy_twin});
      sampled_differently += g[0].tokens != candidates[i].tokens;
    }
  }
  EXPECT_GT(sampled_differently, 0u);
}

TEST_P(DeviceEngine, DecodeGraphsGiveTheTokensOfPlainSteps) {
  const auto requests = mixed_requests(5, 40);
  const auto plain = run_all(*make_engine(small_config(), runner(GraphMode::kOff)), requests);
  const auto padded = run_all(*make_engine(small_config(), runner(GraphMode::kPadOnly)), requests);
  expect_same_tokens(padded, plain, "padded to buckets");
  auto engine = make_engine(small_config(), runner(GraphMode::kCapture));
  expect_same_tokens(run_all(*engine, requests), plain, "graphs, first use");
  expect_same_tokens(run_all(*engine, requests), plain, "graphs, replayed");
}

// Where the device keeps a timeline (CUDA), the engine adds up each step's device time and the
// device's idle time between back-to-back steps; on the CPU both stay zero.
TEST_P(DeviceEngine, StatsCountDeviceTimeOfSteps) {
  auto engine = make_engine(small_config(), runner());
  const auto start = Clock::now();
  run_all(*engine, mixed_requests(6, 24));
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const EngineStats s = engine->stats();
  if (GetParam() == "cpu") {
    EXPECT_EQ(s.device_busy_seconds, 0.0);
    EXPECT_EQ(s.device_idle_seconds, 0.0);
    return;
  }
  EXPECT_GT(s.device_busy_seconds, 0.0);
  EXPECT_GE(s.device_idle_seconds, 0.0);
  EXPECT_LT(s.device_busy_seconds + s.device_idle_seconds, wall);
}

// 80 layers of dummy weights (the depth of Llama-3.1-70B) on a narrow model: logits finite and
// spread, so that dummy-weight runs exercise real arithmetic.
TEST_P(DeviceEngine, DummyWeightsStayFiniteThroughManyLayers) {
  ModelConfig c = tiny_config("llama");
  c.num_layers = 80;
  c.hidden_size = 128;
  c.intermediate_size = 352;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 503;
  auto runner_owner = make_runner(test_backend(GetParam()), c, nullptr, kDummyWeightsSeed);
  DeviceRunner& runner = *runner_owner;
  runner.reserve_workspace(64, 4);
  runner.init_kv_cache(16, 4);
  ForwardBatch b;
  const auto prompt = random_tokens(11, c.vocab_size, 3);
  b.token_ids = prompt;
  b.query_start = {0, static_cast<int32_t>(prompt.size())};
  b.context_lens = {static_cast<int32_t>(prompt.size())};
  b.max_blocks_per_seq = 3;
  b.block_tables = {5, 2, 9};
  for (int32_t p = 0; p < static_cast<int32_t>(prompt.size()); ++p) {
    b.positions.push_back(p);
    b.slot_mapping.push_back(int64_t{b.block_tables[static_cast<size_t>(p / 4)]} * 4 + p % 4);
  }
  b.logits_indices = {static_cast<int32_t>(prompt.size()) - 1};
  LogitsRequest request;
  request.full_rows = {0};
  runner.begin_step(b, request);
  const StepLogits& out = runner.end_step();
  ASSERT_EQ(out.num_rows, 1);
  const float* row = out.full.data<float>();
  float lo = row[0], hi = row[0];
  for (int64_t i = 0; i < c.vocab_size; ++i) {
    ASSERT_TRUE(std::isfinite(row[i])) << i;
    lo = std::min(lo, row[i]);
    hi = std::max(hi, row[i]);
  }
  EXPECT_GT(hi - lo, 0.5f);
  EXPECT_LT(hi - lo, 1e4f);
}

// Structured output: a masked row's disallowed logits are -inf before the candidates are
// selected and before the row is copied whole; unmasked rows are untouched; fill_masks is called
// once per step, after the forward was enqueued.
TEST_P(DeviceEngine, TokenMasksApplyBeforeTheCandidates) {
  ModelConfig c = tiny_config("llama");
  c.vocab_size = 503;
  auto runner_owner = make_runner(test_backend(GetParam()), c, nullptr, kDummyWeightsSeed);
  DeviceRunner& runner = *runner_owner;
  runner.reserve_workspace(64, 4);
  runner.init_kv_cache(16, 4);
  ForwardBatch b;  // two prompts of 5 tokens, one row each
  for (int32_t s = 0; s < 2; ++s) {
    const auto prompt = random_tokens(5, c.vocab_size, 10 + s);
    b.token_ids.insert(b.token_ids.end(), prompt.begin(), prompt.end());
    for (int32_t p = 0; p < 5; ++p) {
      b.positions.push_back(p);
      b.slot_mapping.push_back(int64_t{s * 2 + p / 4} * 4 + p % 4);
    }
    b.block_tables.insert(b.block_tables.end(), {s * 2, s * 2 + 1});
    b.context_lens.push_back(5);
    b.logits_indices.push_back(s * 5 + 4);
  }
  b.query_start = {0, 5, 10};
  b.max_blocks_per_seq = 2;

  LogitsRequest plain;
  plain.top_k = 4;
  plain.full_rows = {0, 1};
  runner.begin_step(b, plain);
  const StepLogits& free_out = runner.end_step();
  const std::vector<float> free0(free_out.full.data<float>(),
                                 free_out.full.data<float>() + c.vocab_size);
  const std::vector<float> free1(free_out.full.data<float>() + c.vocab_size,
                                 free_out.full.data<float>() + 2 * c.vocab_size);

  const std::vector<int32_t> allowed = {3, 64, 97, 250, 502};
  LogitsRequest masked = plain;
  masked.masked_rows = {1};
  int calls = 0;
  masked.fill_masks = [&](std::span<uint32_t> words) {
    ++calls;
    ASSERT_EQ(words.size(), static_cast<size_t>((c.vocab_size + 31) / 32));
    std::fill(words.begin(), words.end(), 0u);
    for (const int32_t t : allowed) words[static_cast<size_t>(t / 32)] |= 1u << (t % 32);
  };
  runner.begin_step(b, masked);
  const StepLogits& out = runner.end_step();
  EXPECT_EQ(calls, 1);
  const float* row0 = out.full.data<float>();
  const float* row1 = out.full.data<float>() + c.vocab_size;
  for (int64_t t = 0; t < c.vocab_size; ++t) {
    EXPECT_EQ(row0[t], free0[static_cast<size_t>(t)]) << "unmasked row, token " << t;
    const bool ok = std::find(allowed.begin(), allowed.end(), t) != allowed.end();
    if (ok) {
      EXPECT_EQ(row1[t], free1[static_cast<size_t>(t)]) << t;
    } else {
      EXPECT_EQ(row1[t], -std::numeric_limits<float>::infinity()) << t;
    }
  }
  // The candidates of the masked row: the 4 best allowed tokens.
  std::vector<int32_t> best = allowed;
  std::sort(best.begin(), best.end(), [&](int32_t x, int32_t y) {
    return free1[static_cast<size_t>(x)] > free1[static_cast<size_t>(y)];
  });
  for (int32_t j = 0; j < 4; ++j) {
    EXPECT_EQ(out.top_ids.data<int32_t>()[4 + j], best[static_cast<size_t>(j)]) << j;
  }
}

}  // namespace
// A vocabulary padded past the tokenizer: the ids from sampled_vocab on are -inf in every row
// before the candidates are selected, before the log-sum-exp and before rows are copied whole;
// the columns below are untouched. The padding starts at the free row's best token, so without
// the mask it would have been the first candidate.
TEST_P(DeviceEngine, PaddedVocabularyIsNeverACandidate) {
  ModelConfig c = tiny_config("llama");
  c.vocab_size = 503;
  auto runner_owner = make_runner(test_backend(GetParam()), c, nullptr, kDummyWeightsSeed);
  DeviceRunner& runner = *runner_owner;
  runner.reserve_workspace(64, 4);
  runner.init_kv_cache(16, 4);
  ForwardBatch b;
  const auto prompt = random_tokens(6, c.vocab_size, 21);
  b.token_ids = prompt;
  for (int32_t p = 0; p < 6; ++p) {
    b.positions.push_back(p);
    b.slot_mapping.push_back(int64_t{p / 4} * 4 + p % 4);
  }
  b.block_tables = {0, 1};
  b.context_lens = {6};
  b.logits_indices = {5};
  b.query_start = {0, 6};
  b.max_blocks_per_seq = 2;

  LogitsRequest plain;
  plain.top_k = 4;
  plain.full_rows = {0};
  runner.begin_step(b, plain);
  const StepLogits& free_out = runner.end_step();
  const std::vector<float> free(free_out.full.data<float>(),
                                free_out.full.data<float>() + c.vocab_size);
  const int32_t best = free_out.top_ids.data<int32_t>()[0];
  ASSERT_GT(best, 4) << "the test needs the best token to leave 4 below it";

  LogitsRequest padded = plain;
  padded.sampled_vocab = best;
  runner.begin_step(b, padded);
  const StepLogits& out = runner.end_step();
  const float* row = out.full.data<float>();
  double sum = 0.0;
  for (int64_t t = 0; t < c.vocab_size; ++t) {
    if (t < best) {
      EXPECT_EQ(row[t], free[static_cast<size_t>(t)]) << t;
      sum += std::exp(static_cast<double>(free[static_cast<size_t>(t)]));
    } else {
      EXPECT_EQ(row[t], -std::numeric_limits<float>::infinity()) << t;
    }
  }
  std::vector<int32_t> order(static_cast<size_t>(best));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return free[static_cast<size_t>(x)] > free[static_cast<size_t>(y)];
  });
  for (int32_t j = 0; j < 4; ++j) {
    EXPECT_EQ(out.top_ids.data<int32_t>()[j], order[static_cast<size_t>(j)]) << j;
  }
  EXPECT_NEAR(out.log_sum_exp.data<float>()[0], std::log(sum), 1e-3);
}

}  // namespace inflight::testing
