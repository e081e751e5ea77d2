// Batch invariance with the real SmolLM2-135M on every device (cpu; cuda in its batch-invariant
// mode, skipped without a GPU): each of 64 concurrent greedy requests of mixed lengths (real
// prompts: the fortune items of the shared prompt set) produces exactly the tokens it produces
// alone, also with prefix-cache hits, chunked prefill and forced preemption. Prompts and
// outputs are short to keep a 2-core run modest. Tiny random mixture-of-experts models, the same
// on both devices.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <tuple>

#include "engine_harness.h"
#include "test_data.h"

namespace inflight::testing {
namespace {

constexpr int kNumRequests = 64;

// The first `count` fortune prompts, cut to at most `max_chars` at a word boundary.
std::vector<std::string> fortune_prompts(const std::string& xz_path, int count, size_t max_chars) {
  std::string json;
  FILE* pipe = popen(("xz -dc '" + xz_path + "'").c_str(), "r");
  if (pipe == nullptr) return {};
  char buf[1 << 16];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) json.append(buf, n);
  if (pclose(pipe) != 0) return {};
  std::vector<std::string> out;
  for (const auto& item : nlohmann::json::parse(json)) {
    if (item.at("source") != "fortune") continue;
    std::string text = item.at("conversations").at(0).at("value");
    if (text.size() > max_chars) {
      const size_t cut = text.rfind(' ', max_chars);
      text.resize(cut == std::string::npos || cut == 0 ? max_chars : cut);
    }
    if (text.empty()) continue;
    out.push_back(text);
    if (static_cast<int>(out.size()) == count) break;
  }
  return out;
}

class SmolLmBatchInvariance : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    const std::string model = model_path();
    const std::string prompts_xz = data_path("prompts/prompts_sharegpt_like.json.xz");
    if (model.empty() || prompts_xz.empty()) return;
    const auto prompts = fortune_prompts(prompts_xz, kNumRequests, 48);
    if (static_cast<int>(prompts.size()) < kNumRequests) return;
    files_ = ModelFiles::open(model).release();
    tokenizer_ = new std::shared_ptr<const Tokenizer>(Tokenizer::from_path(model));
    requests_ = new std::vector<Request>();
    for (int i = 0; i < kNumRequests; ++i) {
      Request r;
      r.prompt = prompts[static_cast<size_t>(i)];
      r.sampling.temperature = 0.0f;
      r.sampling.max_tokens = 2 + i % 3;
      requests_->push_back(r);
    }
  }
  static void TearDownTestSuite() {
    alone_.clear();
    delete requests_;
    delete tokenizer_;
    delete files_;
  }

  void SetUp() override {
    if (requests_ == nullptr) {
      GTEST_SKIP() << "skipped: needs the default model (scripts/fetch_model.sh) and the shared "
                      "prompts (INFLIGHT_DATA_DIR)";
    }
    INFLIGHT_REQUIRE_DEVICE(GetParam());
    if (!alone_.contains(GetParam())) {
      EngineConfig c;
      c.enable_prefix_caching = false;  // each request really alone
      auto engine = start(c);
      alone_[GetParam()] = run_alone(*engine, *requests_);
    }
  }

  std::unique_ptr<Engine> start(EngineConfig c) const {
    c.num_kv_blocks = c.num_kv_blocks == 0 ? 512 : c.num_kv_blocks;
    const WeightSource weights = weights_of(*files_);
    auto runner = make_runner(test_backend(GetParam()), files_->config(), &weights);
    return make_engine(c, std::move(runner), *tokenizer_);
  }

  void expect_matches_alone(const std::vector<Completion>& got, const std::string& what) const {
    const std::vector<Completion>& alone = alone_.at(GetParam());
    ASSERT_EQ(got.size(), alone.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(got[i].status.ok()) << got[i].status.to_string();
      EXPECT_EQ(got[i].tokens, alone[i].tokens)
          << what << ": request " << i << " \"" << (*requests_)[i].prompt << "\"";
      EXPECT_EQ(got[i].text, alone[i].text) << what << ": request " << i;
    }
  }

  static ModelFiles* files_;
  static std::shared_ptr<const Tokenizer>* tokenizer_;
  static std::vector<Request>* requests_;
  static std::map<std::string, std::vector<Completion>> alone_;  // by device
};
ModelFiles* SmolLmBatchInvariance::files_ = nullptr;
std::shared_ptr<const Tokenizer>* SmolLmBatchInvariance::tokenizer_ = nullptr;
std::vector<Request>* SmolLmBatchInvariance::requests_ = nullptr;
std::map<std::string, std::vector<Completion>> SmolLmBatchInvariance::alone_;

INSTANTIATE_TEST_SUITE_P(Devices, SmolLmBatchInvariance, ::testing::Values("cpu", "cuda"));

TEST_P(SmolLmBatchInvariance, ConcurrentThenFromThePrefixCache) {
  EngineConfig c;
  c.block_size = 4;  // short prompts still fill blocks
  auto engine = start(c);
  expect_matches_alone(run_all(*engine, *requests_), "64 concurrent");
  const uint64_t hits_before = engine->stats().num_prefix_cache_hits;
  expect_matches_alone(run_all(*engine, *requests_), "prefix-cache hits");
  EXPECT_GT(engine->stats().num_prefix_cache_hits - hits_before, 64u * 4u);
}

TEST_P(SmolLmBatchInvariance, ChunkedPrefillWithForcedPreemption) {
  EngineConfig c;
  c.block_size = 2;                 // every other decode step needs a new block
  c.num_kv_blocks = 16;             // 32 tokens of KV for ~1000 tokens of requests
  c.max_num_batched_tokens = 20;    // prompts are split over steps
  c.enable_prefix_caching = false;  // recomputation after preemption is full
  c.schedule_conservativeness = 0;  // optimistic admission: every request runs out of blocks
  auto engine = start(c);
  expect_matches_alone(run_all(*engine, *requests_), "chunked + preempted");
  const EngineStats s = engine->stats();
  EXPECT_GT(s.num_preemptions, 0u);
  EXPECT_EQ(s.num_free_kv_blocks, s.num_kv_blocks);
}

// Tiny random models of the families whose steps depend most on their neighbours: each of 48
// concurrent greedy requests (sharing prefixes: prefix-cache hits) produces exactly the tokens
// it produces alone. Mixtral and Qwen3-MoE: routing, the grouping by expert and the weighted sum
// of a token do not depend on which other tokens share its step; MPT: ALiBi scores from absolute
// positions over cached prefixes and chunks.
class TinyFamilyBatchInvariance
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(TinyFamilyBatchInvariance, ConcurrentMatchesAlone) {
  const auto& [device, family] = GetParam();
  INFLIGHT_REQUIRE_DEVICE(device);
  const ModelConfig config = tiny_config(family);
  const WeightMap weight_map = random_weights(config, 42);
  const WeightSource weights = weights_of(weight_map);
  const auto start = [&](const EngineConfig& c) {
    return make_engine(c, make_runner(test_backend(device), config, &weights));
  };
  const std::vector<Request> requests = mixed_requests(7, 48);
  EngineConfig alone_config = small_config();
  alone_config.enable_prefix_caching = false;  // each request really alone
  auto alone_engine = start(alone_config);
  const std::vector<Completion> alone = run_alone(*alone_engine, requests);
  auto engine = start(small_config());
  expect_same_tokens(run_all(*engine, requests), alone, family + " on " + device);
  EXPECT_GT(engine->stats().num_prefix_cache_hits, 0u);
}

INSTANTIATE_TEST_SUITE_P(Devices, TinyFamilyBatchInvariance,
                         ::testing::Combine(::testing::Values("cpu", "cuda"),
                                            ::testing::Values("mixtral", "qwen3_moe", "mpt")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace inflight::testing
