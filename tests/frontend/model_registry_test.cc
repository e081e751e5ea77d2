// ModelRegistry on real engines (the tiny Llama fixture on the CPU, prompts as token ids):
// names and aliases, the states of the index, a load error kept as its reason while the other
// model serves on, and an unload that lets the request in flight finish.
#include "frontend/model_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "core/check.h"
#include "frontend/api_error.h"
#include "frontend/generation.h"
#include "frontend/loaded_model.h"
#include "test_data.h"

namespace inflight::frontend {
namespace {

const std::string kTiny = std::string(INFLIGHT_SOURCE_DIR) + "/tests/golden/fixtures/tiny-llama";

// Loads the tiny model for every name but "broken" (its vocabulary's first tokens are the
// default model's: that GGUF gives the tokenizer).
std::shared_ptr<const LoadedModel> load_tiny(const std::string& name) {
  INFLIGHT_CHECK_CODE(name != "broken", ErrorCode::kInvalidFile,
                      "broken/model.safetensors: truncated");
  EngineConfig config;
  config.kv_cache_bytes = 8 << 20;
  ModelSource source;
  source.path = kTiny;
  source.tokenizer = testing::model_path();
  source.device = "cpu";
  auto engine = Engine::load(source, config);
  INFLIGHT_CHECK(engine.ok(), "{}", engine.status().to_string());
  return make_loaded_model(std::move(engine).value(), "");
}

ModelState state_of(ModelRegistry& registry, const std::string& name) {
  for (const auto& m : registry.index()) {
    if (m.name == name) return m.state;
  }
  ADD_FAILURE() << "no model " << name;
  return ModelState::kUnavailable;
}

int status_of(const ModelRegistry& registry, std::string_view name) {
  try {
    registry.resolve(name);
  } catch (const ApiError& e) {
    return e.status();
  }
  return 200;
}

TEST(ModelRegistry, NamesAndAliasesAreUnique) {
  ModelRegistry registry({}, load_tiny);
  registry.add("tiny", {"tiny-llama"});
  try {
    registry.add("other", {"tiny-llama"});
    FAIL() << "a taken alias was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("'tiny-llama' is taken by model 'tiny'"), std::string::npos)
        << e.message();
  }
  EXPECT_THROW(registry.add("tiny-llama", {}), Error);
  EXPECT_EQ(registry.index().size(), 1u);
}

TEST(ModelRegistry, LoadResolveAndTheLoadErrorKeptInTheIndex) {
  if (testing::model_path().empty())
    GTEST_SKIP() << "skipped: the default model (tokenizer) is missing";
  FrontendOptions options;
  options.max_concurrent_requests = 4;
  ModelRegistry registry(options, load_tiny);
  registry.add("tiny", {"tiny-llama"});
  registry.add("broken", {});
  EXPECT_EQ(state_of(registry, "tiny"), ModelState::kUnavailable);
  EXPECT_EQ(status_of(registry, "tiny"), 404);  // known, not loaded
  EXPECT_EQ(status_of(registry, ""), 503);      // nothing loaded

  ASSERT_EQ(registry.load("tiny").message(), "");
  EXPECT_EQ(state_of(registry, "tiny"), ModelState::kReady);
  const auto fe = registry.resolve("tiny-llama");
  EXPECT_EQ(fe, registry.resolve("tiny"));
  EXPECT_EQ(fe, registry.resolve(""));     // the one model served
  EXPECT_EQ(fe, registry.resolve("tgi"));  // TGI clients' placeholder
  EXPECT_EQ(fe->options().max_concurrent_requests, 4);
  EXPECT_TRUE(fe->serves("tiny-llama"));
  EXPECT_EQ(status_of(registry, "nope"), 404);

  const Status s = registry.load("broken");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("broken/model.safetensors: truncated"), std::string::npos);
  const auto index = registry.index();
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[1].state, ModelState::kUnavailable);
  EXPECT_EQ(index[1].reason, "broken/model.safetensors: truncated");
  EXPECT_EQ(registry.resolve(""), fe);  // still the one model served
  EXPECT_EQ(registry.load("missing").code(), StatusCode::kNotFound);
  EXPECT_EQ(registry.unload("missing").code(), StatusCode::kNotFound);
}

TEST(ModelRegistry, SeveralModelsNeedAName) {
  if (testing::model_path().empty())
    GTEST_SKIP() << "skipped: the default model (tokenizer) is missing";
  ModelRegistry registry({}, load_tiny);
  registry.add("a", {});
  registry.add("b", {});
  ASSERT_EQ(registry.load("a").message(), "");
  ASSERT_EQ(registry.load("b").message(), "");
  EXPECT_NE(registry.resolve("a"), registry.resolve("b"));
  try {
    registry.resolve("");
    FAIL() << "an unnamed request was routed";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("2 models are served (a, b)"), std::string::npos);
  }
  EXPECT_EQ(registry.frontends().size(), 2u);
}

TEST(ModelRegistry, UnloadLetsTheRequestInFlightFinish) {
  if (testing::model_path().empty())
    GTEST_SKIP() << "skipped: the default model (tokenizer) is missing";
  ModelRegistry registry({}, load_tiny);
  registry.add("a", {});
  registry.add("b", {});
  ASSERT_EQ(registry.load("a").message(), "");
  ASSERT_EQ(registry.load("b").message(), "");
  Request r;
  r.prompt_token_ids = {96, 77, 40, 46, 6};
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = 24;
  r.sampling.ignore_eos = true;
  auto on_a = Generation::submit(*registry.resolve("a"), {r});
  auto on_b = Generation::submit(*registry.resolve("b"), {r});

  ASSERT_TRUE(registry.unload("a").ok());
  // The request holds its slot: the model is UNLOADING and takes no new request.
  EXPECT_EQ(state_of(registry, "a"), ModelState::kUnloading);
  EXPECT_EQ(status_of(registry, "a"), 404);
  EXPECT_EQ(registry.resolve(""), registry.resolve("b"));

  // Both requests run to their end: no abort on either model.
  for (auto* g : {&on_a, &on_b}) {
    std::vector<TaggedOutput> outputs;
    size_t tokens = 0;
    std::optional<FinishReason> finish;
    while (!(*g)->take(outputs)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (const auto& o : outputs) {
      tokens += o.output.token_ids.size();
      if (o.output.finish_reason) finish = o.output.finish_reason;
    }
    EXPECT_EQ(tokens, 24u);
    EXPECT_EQ(finish, FinishReason::kLength);
  }
  on_a.reset();  // frees the slot: the unload goes on
  while (state_of(registry, "a") != ModelState::kUnavailable) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(registry.index()[0].reason, "unloaded");
  EXPECT_EQ(state_of(registry, "b"), ModelState::kReady);
  // Loaded again on request.
  ASSERT_EQ(registry.load("a").message(), "");
  EXPECT_EQ(state_of(registry, "a"), ModelState::kReady);
}

// Runs `g` to its end: its tokens and finish reason.
std::pair<size_t, std::optional<FinishReason>> finish(const std::shared_ptr<Generation>& g) {
  std::vector<TaggedOutput> outputs;
  while (!g->take(outputs)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  size_t tokens = 0;
  std::optional<FinishReason> reason;
  for (const auto& o : outputs) {
    tokens += o.output.token_ids.size();
    if (o.output.finish_reason) reason = o.output.finish_reason;
  }
  return {tokens, reason};
}

TEST(ModelRegistry, ReloadServesOnUntilTheNewEngineIsUp) {
  if (testing::model_path().empty())
    GTEST_SKIP() << "skipped: the default model (tokenizer) is missing";
  std::atomic<bool> broken{false}, changed{false};
  ModelRegistry registry(
      {}, [&](const std::string& name) { return load_tiny(broken ? "broken" : name); });
  registry.add("a", {});
  registry.set_source({[] { return std::vector<ModelRegistry::Names>{{"a", {}}}; },
                       [&](const std::string&) { return changed.load(); }});
  ASSERT_EQ(registry.load("a").message(), "");
  const auto first = registry.resolve("a");
  // Unchanged files: a load of the loaded model changes nothing.
  ASSERT_EQ(registry.load("a").message(), "");
  EXPECT_EQ(registry.resolve("a"), first);
  changed = true;
  Request r;
  r.prompt_token_ids = {96, 77, 40, 46, 6};
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = 24;
  r.sampling.ignore_eos = true;
  auto before = Generation::submit(*first, {r});

  // A failed reload leaves the loaded engine serving.
  broken = true;
  const Status failed = registry.load("a");
  EXPECT_NE(failed.message().find("failed to reload 'a' (the loaded one serves on)"),
            std::string::npos)
      << failed.message();
  EXPECT_EQ(state_of(registry, "a"), ModelState::kReady);
  EXPECT_EQ(registry.resolve("a"), first);

  // A reload swaps in a new engine; the request on the old one runs to its end.
  broken = false;
  ASSERT_EQ(registry.load("a").message(), "");
  EXPECT_EQ(state_of(registry, "a"), ModelState::kReady);
  const auto second = registry.resolve("a");
  EXPECT_NE(second, first);
  auto after = Generation::submit(*second, {r});
  EXPECT_EQ(finish(before), std::make_pair(size_t{24}, std::optional(FinishReason::kLength)));
  EXPECT_EQ(finish(after), std::make_pair(size_t{24}, std::optional(FinishReason::kLength)));
  before.reset();  // the old engine drains, then stops: a late request on it gets 503
  int late = 200;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (late == 200) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the old engine never stopped";
    try {
      Generation::submit(*first, {r}).reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } catch (const ApiError& e) {
      late = e.status();
    }
  }
  EXPECT_EQ(late, 503);
  EXPECT_EQ(finish(Generation::submit(*registry.resolve("a"), {r})).first, 24u);
}

TEST(ModelRegistry, FollowsItsSource) {
  if (testing::model_path().empty())
    GTEST_SKIP() << "skipped: the default model (tokenizer) is missing";
  std::vector<ModelRegistry::Names> source = {{"a", {}}, {"b", {"bee"}}};
  ModelRegistry registry({}, load_tiny);
  registry.add("a", {});
  registry.add("b", {"bee"});
  registry.set_source({[&] { return source; }, {}});
  ASSERT_EQ(registry.load("a").message(), "");

  // Added: listed and loadable; removed: an UNAVAILABLE model leaves, a READY one stays.
  source = {{"b", {"bee", "b2"}}, {"c", {}}, {"clash", {"bee"}}};
  const auto index = registry.index();
  ASSERT_EQ(index.size(), 3u);
  EXPECT_EQ(index[0].name, "a");
  EXPECT_EQ(index[1].name, "b");
  EXPECT_EQ(index[2].name, "c");  // "clash" takes b's alias: not served
  ASSERT_EQ(registry.load("c").message(), "");
  ASSERT_EQ(registry.load("b").message(), "");
  EXPECT_EQ(registry.resolve("b2"), registry.resolve("b"));  // aliases as the source has them
  ASSERT_TRUE(registry.unload("a").ok());
  // a stays listed while it unloads; once UNAVAILABLE it leaves, gone from the source.
  for (;;) {
    const auto now = registry.index();
    if (now.size() == 2u) break;
    ASSERT_EQ(now[0].name, "a");
    EXPECT_EQ(now[0].state, ModelState::kUnloading);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(registry.load("a").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace inflight::frontend
