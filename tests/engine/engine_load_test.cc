// Engine::load, the public way from a path or dummy shapes to a running engine: what it loads,
// the automatic KV cache size, and the errors a caller gets for a bad source.
#include <gtest/gtest.h>

#include <fstream>

#include "engine_harness.h"
#include "test_data.h"

namespace inflight::testing {
namespace {

Status load_status(const ModelSource& source) {
  auto engine = Engine::load(source);
  return engine.ok() ? Status() : engine.status();
}

TEST(EngineLoad, TheDefaultModelWithItsTokenizerAndTemplate) {
  INFLIGHT_REQUIRE_MODEL(path);
  auto loaded = Engine::load({.path = path, .device = "cpu"});
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  Engine& engine = *loaded.value();
  ASSERT_NE(engine.tokenizer(), nullptr);
  EXPECT_NE(engine.chat_template().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(engine.model_name(), path);
  EXPECT_EQ(engine.device_name(), "cpu");
  // The automatic KV cache on the host: kAutoKvCacheHostBytes, in whole blocks.
  const EngineConfig& c = engine.config();
  EXPECT_EQ(c.kv_cache_bytes, EngineConfig::kAutoKvCacheHostBytes);
  EXPECT_GT(c.num_kv_blocks, 0);
  Request r;
  r.prompt = "The capital of France is";
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = 8;
  const Completion out = run_all(engine, {r})[0];
  ASSERT_TRUE(out.status.ok()) << out.status.to_string();
  EXPECT_EQ(out.tokens[0].size(), 8u);
  EXPECT_NE(out.text[0].find("Paris"), std::string::npos) << out.text[0];
}

TEST(EngineLoad, DummyWeightsFromAConfigJson) {
  const auto dir = scratch_dir("engine_load_dummy");
  std::ofstream(dir / "config.json") << R"({
    "architectures": ["LlamaForCausalLM"], "vocab_size": 97, "hidden_size": 48,
    "intermediate_size": 80, "num_hidden_layers": 2, "num_attention_heads": 6,
    "num_key_value_heads": 2, "max_position_embeddings": 256, "rms_norm_eps": 1e-5})";
  EngineConfig config;
  config.max_num_seqs = 4;
  auto loaded = Engine::load({.dummy_config = (dir / "config.json").string(), .device = "cpu"},
                             config);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  Engine& engine = *loaded.value();
  EXPECT_EQ(engine.tokenizer(), nullptr);
  EXPECT_EQ(engine.vocab_size(), 97);
  EXPECT_EQ(engine.config().max_num_seqs, 4);
  Request r;
  r.prompt_token_ids = {5, 17, 42};
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = 6;
  r.sampling.ignore_eos = true;
  const Completion out = run_all(engine, {r})[0];
  ASSERT_TRUE(out.status.ok()) << out.status.to_string();
  EXPECT_EQ(out.tokens[0].size(), 6u);
}

TEST(EngineLoad, BadSourcesAreRefusedWithTheReason) {
  EXPECT_EQ(load_status({}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(load_status({.path = "x.gguf", .dummy_arch = "llama-3.1-8b"}).code(),
            StatusCode::kInvalidArgument);
  const Status missing = load_status({.path = "/nonexistent/model.gguf", .device = "cpu"});
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("/nonexistent/model.gguf"), std::string::npos);
  const Status preset = load_status({.dummy_arch = "gpt-5", .device = "cpu"});
  EXPECT_EQ(preset.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(preset.message().find("gpt-5"), std::string::npos) << preset.message();
  const Status device = load_status({.dummy_arch = "smollm2-135m", .device = "tpu"});
  EXPECT_FALSE(device.ok());
  EXPECT_NE(device.message().find("tpu"), std::string::npos) << device.message();
}

}  // namespace
}  // namespace inflight::testing
