// LlamaModel with FP8 layers on the CPU backend (model/linear_loader.h): checkpoints held in
// memory in each weight-scale scheme against the same model with the weights dequantized (the
// difference is activation quantization only), online FP8, and hostile scale tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "backend/tiny_llama.h"
#include "core/fp8.h"
#include "model/linear_loader.h"
#include "ops/op_test_util.h"

namespace inflight {
namespace {

using WeightScales = Quantization::WeightScales;
using ActivationScales = Quantization::ActivationScales;

StoredTensor host_tensor(const std::string& name, const Shape& shape, std::vector<float> v) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  std::copy(v.begin(), v.end(), t.data<float>());
  return StoredTensor::from_host(name, t);
}

// `w` [n, k] f32 stored as e4m3 with scales of `kind` (blocks of `block` x `block`).
StoredTensor quantize_stored(const std::string& name, const Tensor& w, WeightScales kind,
                             int64_t block, bool static_input) {
  const int64_t n = w.size(0), k = w.size(1);
  const float* src = w.data<float>();
  const int64_t br =
      kind == WeightScales::kBlock ? block : (kind == WeightScales::kChannel ? 1 : n);
  const int64_t bc = kind == WeightScales::kBlock ? block : k;
  const int64_t rows = (n + br - 1) / br, cols = (k + bc - 1) / bc;
  std::vector<float> scales(static_cast<size_t>(rows * cols));
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n * k));
  for (int64_t r0 = 0; r0 < rows; ++r0) {
    for (int64_t c0 = 0; c0 < cols; ++c0) {
      float amax = 0.0f;
      for (int64_t r = r0 * br; r < std::min(n, (r0 + 1) * br); ++r)
        for (int64_t c = c0 * bc; c < std::min(k, (c0 + 1) * bc); ++c)
          amax = std::max(amax, std::fabs(src[r * k + c]));
      const float s = amax / kE4M3Max;
      scales[static_cast<size_t>(r0 * cols + c0)] = s;
      for (int64_t r = r0 * br; r < std::min(n, (r0 + 1) * br); ++r)
        for (int64_t c = c0 * bc; c < std::min(k, (c0 + 1) * bc); ++c)
          (*bytes)[static_cast<size_t>(r * k + c)] = f32_to_e4m3(src[r * k + c] / s);
    }
  }
  StoredTensor t;
  t.name = name;
  t.shape = {n, k};
  t.type = StoredType::kF8E4M3;
  t.data = bytes->data();
  t.owner = bytes;
  const std::string module = name.substr(0, name.size() - std::string(".weight").size());
  const Shape scale_shape = kind == WeightScales::kTensor    ? Shape{1}
                            : kind == WeightScales::kChannel ? Shape{n, 1}
                                                             : Shape{rows, cols};
  t.scale =
      std::make_shared<StoredTensor>(host_tensor(module + ".weight_scale", scale_shape, scales));
  if (kind == WeightScales::kBlock) t.block_rows = t.block_cols = block;
  if (static_input) {
    t.input_scale =
        std::make_shared<StoredTensor>(host_tensor(module + ".input_scale", {1}, {0.05f}));
  }
  return t;
}

bool is_linear(const std::string& name) {
  return name.find("_proj.weight") != std::string::npos;
}

struct Checkpoint {
  std::map<std::string, StoredTensor> tensors;
  WeightSource source() const {
    return [this](const std::string& name) -> std::optional<StoredTensor> {
      const auto it = tensors.find(name);
      if (it == tensors.end()) return std::nullopt;
      return it->second;
    };
  }
};

Checkpoint fp8_checkpoint(const WeightMap& weights, WeightScales kind, int64_t block,
                          bool static_input) {
  Checkpoint c;
  for (const auto& [name, t] : weights) {
    c.tensors[name] = is_linear(name) ? quantize_stored(name, t, kind, block, static_input)
                                      : StoredTensor::from_host(name, t);
  }
  return c;
}

// Logits of every position of one sequence.
Tensor run(LlamaModel& model, const std::vector<int32_t>& tokens) {
  KvCache cache = model.make_kv_cache(8, 16);
  testing::RandomBlocks pool(8, 3);
  testing::SeqState seq{tokens, {}, 0};
  ForwardBatch b = testing::make_step({{&seq, static_cast<int32_t>(tokens.size())}}, 16, pool);
  b.logits_indices.resize(tokens.size());
  std::iota(b.logits_indices.begin(), b.logits_indices.end(), 0);
  const Tensor logits = model.forward(b, cache);
  Tensor copy = Tensor::empty(logits.shape(), DType::kF32);
  std::copy_n(logits.data<float>(), logits.numel(), copy.data<float>());
  return copy;
}

double rel_l2(const Tensor& a, const Tensor& b) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = a.data<float>()[i] - b.data<float>()[i];
    num += d * d;
    den += double(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(num / den);
}

TEST(Fp8Model, CheckpointSchemesMatchTheirDequantizedWeights) {
  CpuBackend backend;
  struct Case {
    WeightScales kind;
    int64_t block;
    bool static_input;
  };
  // Blocks of 16: the tiny config's fused q/k/v parts (48, 16, 16 rows) end on block
  // boundaries; blocks of 32 do not (48 % 32), so those scales become 1 x 32 row groups.
  for (const Case cs :
       {Case{WeightScales::kTensor, 0, true}, Case{WeightScales::kTensor, 0, false},
        Case{WeightScales::kChannel, 0, false}, Case{WeightScales::kChannel, 0, true},
        Case{WeightScales::kBlock, 16, false}, Case{WeightScales::kBlock, 32, false}}) {
    for (const std::string arch : {"llama", "qwen2"}) {
      SCOPED_TRACE(fmt::format("{} kind {} block {} static {}", arch, int(cs.kind), cs.block,
                               cs.static_input));
      ModelConfig c = testing::tiny_config(arch);
      const WeightMap weights = testing::random_weights(c, 7);
      const Checkpoint ckpt = fp8_checkpoint(weights, cs.kind, cs.block, cs.static_input);
      WeightMap dequantized;
      for (const auto& [name, t] : ckpt.tensors) dequantized[name] = to_host_f32(t);
      LlamaModel reference(c, weights_of(dequantized), backend);
      c.quantization.method = Quantization::Method::kFp8;
      c.quantization.source = "test";
      c.quantization.weights = cs.kind;
      c.quantization.activations =
          cs.static_input ? ActivationScales::kStaticTensor
                          : (cs.kind == WeightScales::kBlock ? ActivationScales::kDynamicGroup
                                                             : ActivationScales::kDynamicToken);
      LlamaModel fp8(c, ckpt.source(), backend);
      EXPECT_LT(fp8.weight_bytes(), reference.weight_bytes());
      const std::vector<int32_t> tokens = testing::random_tokens(12, c.vocab_size, 5);
      const double err = rel_l2(run(fp8, tokens), run(reference, tokens));
      // Only the activations' quantization differs: e4m3 keeps 3 mantissa bits, ~8% over two
      // tiny layers here (static scales also saturate large values). A scale applied to the
      // wrong rows or blocks is off by O(1).
      EXPECT_LT(err, cs.static_input ? 0.2 : 0.15);
      EXPECT_GT(err, 0.0);  // the activations really were quantized
    }
  }
}

TEST(Fp8Model, OnlineQuantizationStaysCloseToTheOriginal) {
  CpuBackend backend;
  ModelConfig c = testing::tiny_config("mistral");
  const WeightMap weights = testing::random_weights(c, 9);
  LlamaModel original(c, weights_of(weights), backend);
  const std::vector<int32_t> tokens = testing::random_tokens(20, c.vocab_size, 2);
  const Tensor expected = run(original, tokens);
  for (const char* name : {"fp8", "fp8-tensor", "fp8-block"}) {
    SCOPED_TRACE(name);
    c.quantization = Quantization::online(name);
    LlamaModel fp8(c, weights_of(weights), backend);
    EXPECT_LT(fp8.weight_bytes(), original.weight_bytes());
    const double err = rel_l2(run(fp8, tokens), expected);
    EXPECT_LT(err, 0.15);
    EXPECT_GT(err, 0.0);
    // Dummy weights too.
    LlamaModel dummy(c, backend, 42);
    EXPECT_EQ(run(dummy, tokens).size(0), 20);
  }
}

// An e4m3 KV cache (a scale per token and kv head) under unquantized weights: every attention
// read goes through the cache, so a prompt's logits already show its rounding.
TEST(Fp8Model, Fp8KvCacheStaysCloseToTheExactCache) {
  CpuBackend backend;
  for (const std::string arch : {"llama", "qwen2"}) {
    SCOPED_TRACE(arch);
    ModelConfig c = testing::tiny_config(arch);
    const WeightMap weights = testing::random_weights(c, 11);
    LlamaModel exact(c, weights_of(weights), backend);
    c.quantization.fp8_kv_cache = true;
    LlamaModel fp8_kv(c, weights_of(weights), backend);
    EXPECT_EQ(fp8_kv.make_kv_cache(8, 16).dtype(), DType::kF8E4M3);
    EXPECT_EQ(fp8_kv.weight_bytes(), exact.weight_bytes());
    const std::vector<int32_t> tokens = testing::random_tokens(24, c.vocab_size, 3);
    const double err = rel_l2(run(fp8_kv, tokens), run(exact, tokens));
    // e4m3 keeps 3 mantissa bits (~2% RMS per element at a per-vector scale); attention
    // averages over keys. A wrong scale or slot is off by O(1).
    EXPECT_LT(err, 0.1);
    EXPECT_GT(err, 0.0);
  }
}

TEST(Fp8Model, RejectsHostileScales) {
  CpuBackend backend;
  ModelConfig c = testing::tiny_config("llama");
  const WeightMap weights = testing::random_weights(c, 4);
  c.quantization.method = Quantization::Method::kFp8;
  c.quantization.source = "test";
  c.quantization.weights = WeightScales::kChannel;
  for (const float bad : {std::nanf(""), 0.0f, -1.0f, INFINITY}) {
    Checkpoint ckpt = fp8_checkpoint(weights, WeightScales::kChannel, 0, false);
    StoredTensor& w = ckpt.tensors["model.layers.1.mlp.down_proj.weight"];
    std::vector<float> s(static_cast<size_t>(w.shape[0]), 0.01f);
    s[3] = bad;
    w.scale = std::make_shared<StoredTensor>(
        host_tensor("model.layers.1.mlp.down_proj.weight_scale", {w.shape[0], 1}, s));
    try {
      LlamaModel m(c, ckpt.source(), backend);
      ADD_FAILURE() << "scale " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidFile);
      EXPECT_NE(e.message().find("down_proj.weight_scale"), std::string::npos) << e.message();
    }
  }
  // Fused parts in different formats.
  Checkpoint mixed = fp8_checkpoint(weights, WeightScales::kChannel, 0, false);
  mixed.tensors["model.layers.0.self_attn.k_proj.weight"] =
      StoredTensor::from_host("model.layers.0.self_attn.k_proj.weight",
                              weights.at("model.layers.0.self_attn.k_proj.weight"));
  EXPECT_EQ(testing::error_code_of([&] { LlamaModel m(c, mixed.source(), backend); }),
            ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace inflight
