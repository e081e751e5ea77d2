// The architecture registry: every name a file may give resolves to its family, the family's
// rules apply, unknown names and unsupported features are refused naming them, and each family
// builds a model that runs a step.
#include "model/registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "backend/cpu/cpu_backend.h"
#include "backend/tiny_llama.h"
#include "core/check.h"
#include "core/fp8.h"

namespace inflight {
namespace {

ErrorCode resolve_error(const ModelConfig& c, std::string* message) {
  try {
    resolve_architecture(c);
  } catch (const Error& e) {
    *message = e.what();
    return e.code();
  }
  return ErrorCode::kInternal;
}

TEST(Registry, EveryNameResolvesToItsFamily) {
  ASSERT_FALSE(architectures().empty());
  for (const Architecture& a : architectures()) {
    std::vector<std::string_view> names = a.hf_names;
    names.insert(names.end(), a.gguf_names.begin(), a.gguf_names.end());
    for (const std::string_view name : names) {
      ModelConfig c = testing::tiny_config(std::string(a.family));
      c.architecture = std::string(name);
      const ModelConfig r = resolve_architecture(c);
      EXPECT_EQ(r.architecture, a.family) << name;
      EXPECT_EQ(resolve_architecture(r).architecture, a.family) << "resolving is idempotent";
    }
  }
}

TEST(Registry, FamilyRulesApply) {
  ModelConfig qwen = testing::tiny_config("llama");
  qwen.architecture = "Qwen2ForCausalLM";
  qwen.o_proj_bias = true;
  const ModelConfig q = resolve_architecture(qwen);
  EXPECT_TRUE(q.attention_bias);  // Qwen2 always has q/k/v biases
  EXPECT_FALSE(q.o_proj_bias);
  ModelConfig llama = testing::tiny_config("mistral");  // a window
  llama.architecture = "LlamaForCausalLM";
  EXPECT_EQ(resolve_architecture(llama).sliding_window, 0);
  ModelConfig mistral = testing::tiny_config("mistral");
  mistral.architecture = "MistralForCausalLM";
  EXPECT_EQ(resolve_architecture(mistral).sliding_window, 9);

  ModelConfig qwen3 = testing::tiny_config("llama");
  qwen3.architecture = "Qwen3ForCausalLM";
  qwen3.rope_scaling = {};
  EXPECT_TRUE(resolve_architecture(qwen3).qk_norm);  // Qwen3 always has q/k norms
  ModelConfig mixtral = testing::tiny_config("mixtral");
  mixtral.architecture = "MixtralForCausalLM";
  mixtral.norm_topk_prob = false;
  const ModelConfig m = resolve_architecture(mixtral);
  EXPECT_TRUE(m.norm_topk_prob);  // Mixtral always renormalises its top-k weights
  EXPECT_EQ(m.sliding_window, 9);
  ModelConfig qwen3_moe = testing::tiny_config("qwen3_moe");
  qwen3_moe.architecture = "Qwen3MoeForCausalLM";
  qwen3_moe.norm_topk_prob = false;
  qwen3_moe.qk_norm = false;
  const ModelConfig qm = resolve_architecture(qwen3_moe);
  EXPECT_FALSE(qm.norm_topk_prob);  // the config's norm_topk_prob
  EXPECT_TRUE(qm.qk_norm);
}

TEST(Registry, RefusesUnknownArchitecturesAndMissingFeatures) {
  std::string message;
  ModelConfig c = testing::tiny_config("llama");
  c.architecture = "FalconForCausalLM";
  EXPECT_EQ(resolve_error(c, &message), ErrorCode::kUnsupported);
  EXPECT_NE(message.find("'FalconForCausalLM'"), std::string::npos) << message;
  EXPECT_NE(message.find("LlamaForCausalLM"), std::string::npos) << "lists what is supported";

  ModelConfig moe = testing::tiny_config("llama");
  moe.num_experts = 8;
  moe.num_experts_per_token = 2;
  EXPECT_EQ(resolve_error(moe, &message), ErrorCode::kUnsupported);
  EXPECT_NE(message.find("8 experts"), std::string::npos) << message;
  ModelConfig alibi = testing::tiny_config("llama");
  alibi.positions = ModelConfig::Positions::kAlibi;
  EXPECT_EQ(resolve_error(alibi, &message), ErrorCode::kUnsupported);
  ModelConfig gelu = testing::tiny_config("llama");
  gelu.mlp = ModelConfig::Mlp::kGelu;
  EXPECT_EQ(resolve_error(gelu, &message), ErrorCode::kUnsupported);
  EXPECT_NE(message.find("GELU"), std::string::npos) << message;
  // MPT needs its own graph's features, and multi-head attention.
  ModelConfig rope_mpt = testing::tiny_config("llama");
  rope_mpt.architecture = "mpt";
  EXPECT_EQ(resolve_error(rope_mpt, &message), ErrorCode::kUnsupported);
  ModelConfig mqa_mpt = testing::tiny_config("mpt");
  mqa_mpt.num_kv_heads = 1;
  EXPECT_EQ(resolve_error(mqa_mpt, &message), ErrorCode::kUnsupported);
  EXPECT_NE(message.find("1 kv heads"), std::string::npos) << message;
  ModelConfig qwen_window = testing::tiny_config("qwen2");
  qwen_window.sliding_window = 64;
  EXPECT_EQ(resolve_error(qwen_window, &message), ErrorCode::kUnsupported);
  EXPECT_NE(message.find("use_sliding_window"), std::string::npos) << message;

  // Mixture-of-experts families need their experts; dense ones refuse them.
  ModelConfig dense_mixtral = testing::tiny_config("llama");
  dense_mixtral.architecture = "MixtralForCausalLM";
  EXPECT_EQ(resolve_error(dense_mixtral, &message), ErrorCode::kInvalidFile);
  EXPECT_NE(message.find("num_experts_per_tok"), std::string::npos) << message;
  ModelConfig qwen3_experts = testing::tiny_config("qwen3_moe");
  qwen3_experts.architecture = "Qwen3ForCausalLM";
  EXPECT_EQ(resolve_error(qwen3_experts, &message), ErrorCode::kUnsupported);
  ModelConfig no_top_k = testing::tiny_config("qwen3_moe");
  no_top_k.num_experts_per_token = 0;
  EXPECT_EQ(resolve_error(no_top_k, &message), ErrorCode::kInvalidFile);
  ModelConfig top_k_too_large = testing::tiny_config("mixtral");
  top_k_too_large.num_experts_per_token = 6;  // of 5 experts
  EXPECT_EQ(resolve_error(top_k_too_large, &message), ErrorCode::kInvalidFile);
}

TEST(Registry, MissingExpertTensorIsNamed) {
  CpuBackend backend;
  const ModelConfig c = testing::tiny_config("mixtral");
  WeightMap w = testing::random_weights(c, 4);
  w.erase("model.layers.1.block_sparse_moe.experts.3.w3.weight");
  std::string message;
  try {
    make_model(c, weights_of(w), backend);
  } catch (const Error& e) {
    message = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
  EXPECT_NE(message.find("'model.layers.1.block_sparse_moe.experts.3.w3.weight'"),
            std::string::npos)
      << message;
}

// A one-sequence step of `tokens` new tokens from position 0 (block size 4, one block each).
ForwardBatch prompt_step(const std::vector<int32_t>& tokens) {
  ForwardBatch b;
  const auto n = static_cast<int32_t>(tokens.size());
  b.token_ids = tokens;
  for (int32_t i = 0; i < n; ++i) {
    b.positions.push_back(i);
    b.slot_mapping.push_back(i);
    b.logits_indices.push_back(i);
  }
  b.query_start = {0, n};
  b.context_lens = {n};
  b.max_blocks_per_seq = (n + 3) / 4;
  for (int32_t i = 0; i < b.max_blocks_per_seq; ++i) b.block_tables.push_back(i);
  return b;
}

TEST(Registry, StackedExpertsLoadAsThePerExpertTensors) {
  // GGUF files stack a layer's experts into one [E, rows, cols] tensor per projection.
  CpuBackend backend;
  const ModelConfig c = testing::tiny_config("qwen3_moe");
  const WeightMap per_expert = testing::random_weights(c, 5);
  WeightMap stacked;
  for (const auto& [name, t] : per_expert) {
    if (name.find(".experts.") == std::string::npos) stacked[name] = t;
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      const auto name = [&](const std::string& e) {
        return fmt::format("model.layers.{}.mlp.experts.{}{}.weight", l, e, proj);
      };
      const Tensor first = per_expert.at(name("0."));
      Tensor all = Tensor::empty({c.num_experts, first.size(0), first.size(1)}, DType::kF32);
      for (int64_t e = 0; e < c.num_experts; ++e) {
        std::memcpy(all.data<float>() + e * first.numel(),
                    per_expert.at(name(std::to_string(e) + ".")).raw(), first.nbytes());
      }
      stacked[name("")] = all;
    }
  }
  const ForwardBatch b = prompt_step({5, 17, 3, 88, 41, 9, 60});
  const auto logits = [&](const WeightMap& w) {
    const std::unique_ptr<Model> m = make_model(c, weights_of(w), backend);
    KvCache cache = m->make_kv_cache(4, 4);
    const Tensor out = m->forward(b, cache);
    return std::vector<float>(out.data<float>(), out.data<float>() + out.numel());
  };
  EXPECT_EQ(logits(stacked), logits(per_expert));

  // Fewer stacked experts than the config counts, or a stacked tensor that is not 3-D.
  std::string message;
  const auto load_error = [&](const WeightMap& w) {
    try {
      make_model(c, weights_of(w), backend);
    } catch (const Error& e) {
      message = e.what();
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  WeightMap short_stack = stacked;
  const std::string up = "model.layers.1.mlp.experts.up_proj.weight";
  short_stack[up] = stacked.at(up).rows(0, c.num_experts - 1);
  EXPECT_EQ(load_error(short_stack), ErrorCode::kInvalidFile);
  EXPECT_NE(message.find(up), std::string::npos) << message;
  WeightMap flat = stacked;
  flat[up] = stacked.at(up).reshape({c.num_experts * c.moe_intermediate_size, c.hidden_size});
  EXPECT_EQ(load_error(flat), ErrorCode::kInvalidFile);
  EXPECT_NE(message.find(up), std::string::npos) << message;
}

TEST(Registry, E4m3ExpertsAreDequantizedAtLoad) {
  // An FP8 checkpoint's experts (e4m3 with a per-tensor scale) load in the compute dtype, the
  // values e4m3 x scale: the model equals one given those values as f32.
  CpuBackend backend;
  const ModelConfig c = testing::tiny_config("mixtral");
  WeightMap dequantized = testing::random_weights(c, 6);
  std::map<std::string, std::pair<std::vector<uint8_t>, std::vector<float>>> fp8;  // bytes, scale
  for (auto& [name, t] : dequantized) {
    if (name.find(".experts.") == std::string::npos) continue;
    float max_abs = 0.0f;
    for (int64_t i = 0; i < t.numel(); ++i)
      max_abs = std::max(max_abs, std::abs(t.data<float>()[i]));
    const float scale = max_abs / kE4M3Max;
    auto& [bytes, scales] = fp8[name];
    scales = {scale};
    for (int64_t i = 0; i < t.numel(); ++i) {
      bytes.push_back(f32_to_e4m3(t.data<float>()[i] / scale));
      t.data<float>()[i] = e4m3_to_f32(bytes.back()) * scale;
    }
  }
  const WeightSource plain = weights_of(dequantized);
  const WeightSource quantized = [&](const std::string& name) -> std::optional<StoredTensor> {
    const auto it = fp8.find(name);
    if (it == fp8.end()) return plain(name);
    StoredTensor t = *plain(name);
    t.type = StoredType::kF8E4M3;
    t.data = it->second.first.data();
    t.owner = nullptr;
    auto scale = std::make_shared<StoredTensor>();
    scale->name = name + "_scale";
    scale->shape = {1};
    scale->type = StoredType::kF32;
    scale->data = reinterpret_cast<const uint8_t*>(it->second.second.data());
    t.scale = scale;
    return t;
  };
  const ForwardBatch b = prompt_step({2, 7, 1, 64, 30});
  const auto logits = [&](const WeightSource& w) {
    const std::unique_ptr<Model> m = make_model(c, w, backend);
    KvCache cache = m->make_kv_cache(2, 4);
    const Tensor out = m->forward(b, cache);
    return std::vector<float>(out.data<float>(), out.data<float>() + out.numel());
  };
  EXPECT_EQ(logits(quantized), logits(plain));
}

TEST(Registry, EachFamilyBuildsAModelThatRunsAStep) {
  CpuBackend backend;
  for (const char* family : {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe", "mpt"}) {
    const ModelConfig c = testing::tiny_config(family);
    const std::unique_ptr<Model> dummy = make_dummy_model(c, backend, 3);
    const std::unique_ptr<Model> loaded =
        make_model(c, weights_of(testing::random_weights(c, 4)), backend);
    for (Model* m : {dummy.get(), loaded.get()}) {
      EXPECT_EQ(m->config().architecture, family);
      EXPECT_GT(m->weight_bytes(), 0);
      KvCache cache = m->make_kv_cache(8, 4);
      ForwardBatch b;
      b.token_ids = {1, 2, 3};
      b.positions = {0, 1, 2};
      b.slot_mapping = {0, 1, 2};
      b.query_start = {0, 3};
      b.context_lens = {3};
      b.block_tables = {0};
      b.max_blocks_per_seq = 1;
      b.logits_indices = {2};
      const Tensor logits = m->forward(b, cache);
      EXPECT_EQ(logits.shape(), (Shape{1, c.vocab_size})) << family;
    }
  }
}

}  // namespace
}  // namespace inflight
