// The built-in dummy-weight shapes: each preset is a valid config with the published sizes, and
// dummy_model_config takes exactly one of a preset name or a config.json.
#include "model/arch_presets.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/check.h"
#include "test_data.h"

namespace inflight {
namespace {

int64_t parameters(const ModelConfig& c) {
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  // A dense MLP, or the experts and their router.
  const int64_t mlp =
      c.num_experts > 0
          ? c.num_experts * c.hidden_size * (3 * c.expert_intermediate_size() + 1)
          : (c.mlp == ModelConfig::Mlp::kGelu ? 2 : 3) * c.hidden_size * c.intermediate_size;
  const int64_t layer = c.hidden_size * (q + 2 * kv) + q * c.hidden_size + mlp + 2 * c.hidden_size +
                        (c.qk_norm ? 2 * c.head_dim : 0);
  return c.num_layers * layer + c.vocab_size * c.hidden_size * (c.tie_word_embeddings ? 1 : 2);
}

TEST(ArchPresets, PublishedShapes) {
  for (const std::string& name : arch_preset_names()) {
    const auto c = arch_preset(name);
    ASSERT_TRUE(c.has_value()) << name;
    EXPECT_NO_THROW(c->validate()) << name;
  }
  EXPECT_NEAR(static_cast<double>(parameters(*arch_preset("llama-3.1-8b"))), 8.03e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(parameters(*arch_preset("llama-3.1-70b"))), 70.55e9, 0.1e9);
  EXPECT_NEAR(static_cast<double>(parameters(*arch_preset("qwen2.5-7b"))), 7.6e9, 0.05e9);
  EXPECT_NEAR(static_cast<double>(parameters(*arch_preset("mistral-7b"))), 7.24e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(parameters(*arch_preset("smollm2-135m"))), 134.5e6, 0.5e6);
  // Hugging Face model cards: Qwen3-8B 8.2B, Mixtral-8x7B 46.7B, Qwen3-30B-A3B 30.5B.
  EXPECT_NEAR(static_cast<double>(parameters(*arch_preset("qwen3-8b"))), 8.19e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(parameters(*arch_preset("mixtral-8x7b"))), 46.70e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(parameters(*arch_preset("qwen3-30b-a3b"))), 30.53e9, 0.02e9);
  // MPT-7B: 6.65B (tied embeddings, the GELU MLP of 4 d_model, no biases).
  const ModelConfig mpt = *arch_preset("mpt-7b");
  EXPECT_NEAR(static_cast<double>(parameters(mpt)), 6.649e9, 0.001e9);
  EXPECT_EQ(mpt.positions, ModelConfig::Positions::kAlibi);
  EXPECT_EQ(mpt.max_position_embeddings, 2048);
  EXPECT_EQ(dummy_model_config("mpt-7b", "").architecture, "mpt");
  EXPECT_NEAR(static_cast<double>(parameters(*arch_preset("mpt-30b"))), 29.96e9, 0.01e9);
  EXPECT_FALSE(arch_preset("llama-9").has_value());
}

TEST(ArchPresets, DummyModelConfigTakesAPresetOrAConfigFile) {
  EXPECT_EQ(dummy_model_config("qwen2.5-7b", "").architecture, "qwen2");
  EXPECT_THROW(dummy_model_config("", ""), Error);
  EXPECT_THROW(dummy_model_config("nope", ""), Error);
  const auto dir = testing::scratch_dir("arch_presets");
  const auto path = (dir / "config.json").string();
  std::ofstream(path) << R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 1000,
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512})";
  const ModelConfig c = dummy_model_config("", path);
  EXPECT_EQ(c.num_layers, 3);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_THROW(dummy_model_config("llama-3.1-8b", path), Error);
}

}  // namespace
}  // namespace inflight
