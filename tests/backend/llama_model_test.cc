// LlamaModel argument handling: what it refuses, and with which message.
#include "model/llama.h"

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/tiny_llama.h"
#include "model/registry.h"

namespace inflight {
namespace {

ErrorCode code_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kInternal;
}

TEST(LlamaModel, RejectsMissingAndMisshapenWeights) {
  CpuBackend backend;
  const ModelConfig c = testing::tiny_config("llama");
  auto weights = testing::random_weights(c, 1);
  auto missing = weights;
  missing.erase("model.layers.1.mlp.up_proj.weight");
  EXPECT_EQ(code_of([&] { LlamaModel m(c, weights_of(missing), backend); }), ErrorCode::kNotFound);
  auto no_head = weights;  // untied: the LM head is required, never silently tied
  no_head.erase("lm_head.weight");
  EXPECT_EQ(code_of([&] { LlamaModel m(c, weights_of(no_head), backend); }), ErrorCode::kNotFound);
  auto misshapen = weights;
  misshapen["model.layers.0.self_attn.k_proj.weight"] = Tensor::zeros({8, 48}, DType::kF32);
  try {
    LlamaModel m(c, weights_of(misshapen), backend);
    ADD_FAILURE() << "accepted a misshapen k_proj";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidFile);
    EXPECT_NE(std::string(e.what()).find("k_proj"), std::string::npos) << e.what();
  }
  ModelConfig qwen = testing::tiny_config("qwen2");
  auto no_bias = testing::random_weights(qwen, 1);
  no_bias.erase("model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(code_of([&] { LlamaModel m(qwen, weights_of(no_bias), backend); }),
            ErrorCode::kNotFound);
}

// A config that counts more layers than the files hold is refused by the field's name before
// anything is allocated (10^9 layers used to end in std::bad_alloc).
TEST(LlamaModel, RejectsMoreLayersThanTheWeightsHold) {
  CpuBackend backend;
  const ModelConfig c = testing::tiny_config("llama");
  const auto weights = testing::random_weights(c, 1);
  ModelConfig absurd = c;
  absurd.num_layers = 1'000'000'000;
  try {
    LlamaModel m(absurd, weights_of(weights), backend);
    ADD_FAILURE() << "accepted 10^9 layers over " << c.num_layers;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidFile);
    EXPECT_EQ(e.message(),
              "model config: num_layers (num_hidden_layers) is 1000000000, but the weights hold "
              "layers 0..1 only: 'model.layers.2.input_layernorm.weight' is missing");
  }
}

// Weights that cannot fit the device are refused with their size and the device's memory
// before any allocation, dummy weights too.
TEST(LlamaModel, RefusesWeightsLargerThanTheDevice) {
  CpuBackend backend;
  ModelConfig c = testing::tiny_config("llama");
  c.num_layers = 100'000;
  c.hidden_size = 8192;
  c.num_heads = 64;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.intermediate_size = 28672;  // ~3.5 * 10^14 f32 bytes
  try {
    LlamaModel m(c, backend, 1);
    ADD_FAILURE() << "allocated dummy weights of " << c.num_weight_elements() << " elements";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    const std::string what = e.message();
    EXPECT_NE(what.find("the model's dummy weights need "), std::string::npos) << what;
    EXPECT_NE(what.find(" GiB are free"), std::string::npos) << what;
  }
}

TEST(LlamaModel, RejectsUnsupportedArchitecture) {
  CpuBackend backend;
  ModelConfig c = testing::tiny_config("llama");
  const auto weights = testing::random_weights(c, 1);
  c.architecture = "gpt2";
  EXPECT_EQ(code_of([&] { make_model(c, weights_of(weights), backend); }), ErrorCode::kUnsupported);
}

// MPT's logit_scale multiplies the logits (folded into the final LayerNorm at load).
TEST(LlamaModel, MptLogitScaleScalesTheLogits) {
  CpuBackend backend;
  ModelConfig c = testing::tiny_config("mpt");
  const WeightMap weights = testing::random_weights(c, 5);
  const auto logits = [&](float logit_scale) {
    c.logit_scale = logit_scale;
    LlamaModel model(c, weights_of(weights), backend);
    KvCache cache = model.make_kv_cache(4, 16);
    testing::RandomBlocks pool(4, 1);
    testing::SeqState seq{testing::random_tokens(9, c.vocab_size, 2), {}, 0};
    const Tensor out = model.forward(testing::make_step({{&seq, 9}}, 16, pool), cache);
    return std::vector<float>(out.data<float>(), out.data<float>() + out.numel());
  };
  const std::vector<float> plain = logits(1.0f), scaled = logits(0.125f);
  ASSERT_EQ(plain.size(), scaled.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_NEAR(scaled[i], 0.125f * plain[i], 1e-5f * std::max(1.0f, std::abs(plain[i]))) << i;
  }
}

TEST(LlamaModel, ForwardRejectsBadTokensAndForeignCaches) {
  CpuBackend backend;
  const ModelConfig c = testing::tiny_config("qwen2");
  LlamaModel model(c, weights_of(testing::random_weights(c, 2)), backend);
  KvCache cache = model.make_kv_cache(8, 4);
  testing::RandomBlocks pool(8, 1);
  testing::SeqState seq{{1, 2, 96, 97}, {}, 0};
  const ForwardBatch bad_token = testing::make_step({{&seq, 4}}, 4, pool);
  EXPECT_EQ(code_of([&] { model.forward(bad_token, cache); }), ErrorCode::kInvalidArgument);
  KvCache foreign(backend, 3, 8, 4, c.num_kv_heads, c.head_dim, DType::kF32);
  testing::SeqState ok{{1, 2}, {}, 0};
  const ForwardBatch batch = testing::make_step({{&ok, 2}}, 4, pool);
  EXPECT_EQ(code_of([&] { model.forward(batch, foreign); }), ErrorCode::kInvalidArgument);
  // A cache of the right shape in e4m3, for a model that keeps its cache in f32.
  KvCache fp8(backend, c.num_layers, 8, 4, c.num_kv_heads, c.head_dim, DType::kF8E4M3);
  EXPECT_EQ(code_of([&] { model.forward(batch, fp8); }), ErrorCode::kInvalidArgument);
  const Tensor logits = model.forward(batch, cache);
  EXPECT_EQ(logits.shape(), (Shape{2, c.vocab_size}));
}

TEST(LlamaModel, StepWithoutLogitsReturnsAnEmptyTensor) {
  CpuBackend backend;
  const ModelConfig c = testing::tiny_config("mistral");
  LlamaModel model(c, weights_of(testing::random_weights(c, 3)), backend);
  KvCache cache = model.make_kv_cache(4, 16);
  testing::RandomBlocks pool(4, 1);
  testing::SeqState seq{testing::random_tokens(10, c.vocab_size, 1), {}, 0};
  ForwardBatch b = testing::make_step({{&seq, 10}}, 16, pool);
  b.logits_indices.clear();
  const Tensor logits = model.forward(b, cache);
  EXPECT_EQ(logits.shape(), (Shape{0, c.vocab_size}));
}

TEST(RopeInvFreq, Llama3ScalingKeepsHighAndSlowsLowFrequencies) {
  ModelConfig c = testing::tiny_config("llama");
  c.head_dim = 64;
  c.rope_theta = 500000.0f;
  c.rope_scaling.original_max_position_embeddings = 8192;
  ModelConfig plain = c;
  plain.rope_scaling = RopeScaling();
  const auto scaled = rope_inv_freq(c), base = rope_inv_freq(plain);
  ASSERT_EQ(scaled.size(), 32u);
  EXPECT_FLOAT_EQ(base[0], 1.0f);
  EXPECT_FLOAT_EQ(base[1], 1.0f / std::pow(500000.0f, 2.0f / 64.0f));
  EXPECT_EQ(scaled[0], base[0]);                 // wavelength 2 pi: high frequency, kept
  EXPECT_FLOAT_EQ(scaled[31], base[31] / 8.0f);  // longest wavelength: slowed by factor
  for (size_t i = 0; i < 32; ++i) {
    EXPECT_LE(scaled[i], base[i]);
    EXPECT_GE(scaled[i], base[i] / 8.0f * 0.999999f);
  }
  ModelConfig linear = plain;
  linear.rope_scaling.type = RopeScaling::Type::kLinear;
  linear.rope_scaling.factor = 4.0f;
  const auto lin = rope_inv_freq(linear);
  for (size_t i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(lin[i], base[i] / 4.0f);
}

}  // namespace
}  // namespace inflight
