// GgufModelFiles: config and canonical tensors from small GGUF files built here and from the
// real SmolLM2 model, checked against the `gguf` Python package (fixtures/smollm2_values.json),
// and the q/k un-permutation checked through RoPE itself.
#include "formats/gguf_model_files.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "file_builders.h"
#include "formats/ggml_types.h"
#include "model/registry.h"
#include "test_data.h"

namespace inflight {
namespace {

using testing::Bytes;
using testing::GgufBuilder;

// llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel.permute) stores HF row
// (head h, half s, index i) at row (h, i, s): rows reshaped [heads, 2, hd/2] -> [heads, hd/2, 2].
std::vector<float> permute_like_converter(const std::vector<float>& hf, int64_t heads,
                                          int64_t head_dim, int64_t cols) {
  std::vector<float> out(hf.size());
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t i = 0; i < half; ++i)
        for (int64_t c = 0; c < cols; ++c)
          out[((h * half + i) * 2 + s) * cols + c] = hf[((h * 2 + s) * half + i) * cols + c];
  return out;
}

std::vector<float> iota(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// A 1-layer model: hidden 8, 2 heads, 1 kv head (head_dim 4), vocab 5, q/k stored permuted.
Bytes tiny_gguf(const std::string& arch, bool permute, bool with_output) {
  const auto qw = iota(64, 0), kw = iota(32, 100), qb = iota(8, 200);
  GgufBuilder g;
  g.kv_str("general.architecture", arch)
      .kv_str("general.name", "tiny")
      .kv_u32(arch + ".context_length", 256)
      .kv_u32(arch + ".embedding_length", 8)
      .kv_u32(arch + ".block_count", 1)
      .kv_u32(arch + ".feed_forward_length", 16)
      .kv_u32(arch + ".attention.head_count", 2)
      .kv_u32(arch + ".attention.head_count_kv", 1)
      .kv_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f)
      .kv_f32(arch + ".rope.freq_base", 1e6f)
      .kv_str_array("tokenizer.ggml.tokens", {"a", "b", "c", "d", "e"})
      .kv_u32("tokenizer.ggml.bos_token_id", 1)
      .kv_u32("tokenizer.ggml.eos_token_id", 2)
      .kv_u32("tokenizer.ggml.eot_token_id", 4)
      .kv_str("tokenizer.chat_template", "{{ x }}");
  g.tensor("token_embd.weight", 0, {5, 8}, testing::f32_bytes(iota(40, 0)))
      .tensor("blk.0.attn_q.weight", 0, {8, 8},
              testing::f32_bytes(permute ? permute_like_converter(qw, 2, 4, 8) : qw))
      .tensor("blk.0.attn_q.bias", 0, {8},
              testing::f32_bytes(permute ? permute_like_converter(qb, 2, 4, 1) : qb))
      .tensor("blk.0.attn_k.weight", 0, {4, 8},
              testing::f32_bytes(permute ? permute_like_converter(kw, 1, 4, 8) : kw))
      .tensor("blk.0.attn_v.weight", 0, {4, 8}, testing::f32_bytes(iota(32, 300)))
      .tensor("blk.0.ffn_down.weight", 0, {8, 16}, testing::f32_bytes(iota(128, 0)))
      .tensor("output_norm.weight", 0, {8}, testing::f32_bytes(iota(8, 1)))
      .tensor("rope_freqs.weight", 0, {2}, testing::f32_bytes({1.0f, 8.0f}));
  if (with_output) g.tensor("output.weight", 0, {5, 8}, testing::f32_bytes(iota(40, 0)));
  return g.build();
}

std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(GgufModelFiles, CanonicalNames) {
  EXPECT_EQ(GgufModelFiles::canonical_name("token_embd.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("output.weight"), "lm_head.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("output_norm.weight"), "model.norm.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.12.attn_q.bias"),
            "model.layers.12.self_attn.q_proj.bias");
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.0.attn_output.weight"),
            "model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.3.ffn_norm.weight"),
            "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.3.attn_norm.weight"),
            "model.layers.3.input_layernorm.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.29.ffn_gate.weight"),
            "model.layers.29.mlp.gate_proj.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.5.attn_qkv.bias"),  // MPT's fused q/k/v
            "model.layers.5.self_attn.qkv_proj.bias");
  // Qwen3 q/k norms; mixture-of-experts router and stacked experts.
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.4.attn_q_norm.weight"),
            "model.layers.4.self_attn.q_norm.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.4.attn_k_norm.weight"),
            "model.layers.4.self_attn.k_norm.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.1.ffn_gate_inp.weight"),
            "model.layers.1.mlp.gate.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.1.ffn_gate_exps.weight"),
            "model.layers.1.mlp.experts.gate_proj.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.1.ffn_up_exps.weight"),
            "model.layers.1.mlp.experts.up_proj.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.1.ffn_down_exps.weight"),
            "model.layers.1.mlp.experts.down_proj.weight");
  // Older files: one tensor per expert.
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.2.ffn_up.7.weight"),
            "model.layers.2.mlp.experts.7.up_proj.weight");
  EXPECT_EQ(GgufModelFiles::canonical_name("blk.2.ffn_down.0.weight"),
            "model.layers.2.mlp.experts.0.down_proj.weight");
  // Unknown names stay as they are.
  for (const char* n : {"rope_freqs.weight", "blk.x.attn_q.weight", "blk.1.attn_q.scale",
                        "blk.1.ffn_gate_shexp.weight", "blk.1.ffn_gate.x.weight",
                        "blk.1.attn_q.3.weight", "blk..attn_q.weight", "blk.1"}) {
    EXPECT_EQ(GgufModelFiles::canonical_name(n), n);
  }
}

TEST(GgufModelFiles, TinyLlamaConfigAndUnpermutedQK) {
  const Bytes bytes = tiny_gguf("llama", /*permute=*/true, /*with_output=*/false);
  GgufModelFiles m(GgufFile::parse(bytes.data(), bytes.size(), "tiny.gguf"));
  const ModelConfig c = resolve_architecture(m.config());
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.name, "tiny");
  EXPECT_EQ(c.vocab_size, 5);  // from the token count: no llama.vocab_size key
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_EQ(c.rope_theta, 1e6f);
  EXPECT_TRUE(c.tie_word_embeddings);  // no output.weight
  EXPECT_TRUE(c.attention_bias);       // blk.0.attn_q.bias exists
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2, 4}));  // eos and end-of-turn
  EXPECT_EQ(m.chat_template(), "{{ x }}");
  EXPECT_FALSE(m.has_tensor("lm_head.weight"));
  EXPECT_TRUE(m.has_tensor("rope_freqs.weight"));
  EXPECT_EQ(m.tensor_shape("model.layers.0.self_attn.k_proj.weight"), (Shape{4, 8}));
  EXPECT_EQ(values(m.load_f32("model.layers.0.self_attn.q_proj.weight")), iota(64, 0));
  EXPECT_EQ(values(m.load_f32("model.layers.0.self_attn.q_proj.bias")), iota(8, 200));
  EXPECT_EQ(values(m.load_f32("model.layers.0.self_attn.k_proj.weight")), iota(32, 100));
  EXPECT_EQ(values(m.load_f32("model.layers.0.self_attn.v_proj.weight")), iota(32, 300));
  EXPECT_EQ(values(m.load_f32("model.embed_tokens.weight")), iota(40, 0));
  try {
    m.load_f32("blk.0.attn_q.weight");  // GGUF names are not accepted
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("tiny.gguf: no tensor 'blk.0.attn_q.weight'"),
              std::string::npos);
  }
}

// The MPT fixture as llama.cpp's convert writes it (tests/golden/make_golden.py).
TEST(GgufModelFiles, MptConfigAndFusedQkv) {
  const auto files = GgufModelFiles::open(std::string(INFLIGHT_SOURCE_DIR) +
                                          "/tests/golden/fixtures/tiny-mpt.gguf");
  const ModelConfig& c = files->config();
  EXPECT_EQ(c.architecture, "mpt");
  EXPECT_EQ(c.norm, ModelConfig::Norm::kLayer);
  EXPECT_EQ(c.positions, ModelConfig::Positions::kAlibi);
  EXPECT_EQ(c.mlp, ModelConfig::Mlp::kGelu);
  EXPECT_FLOAT_EQ(c.alibi_bias_max, 8.0f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.num_kv_heads, 6);
  EXPECT_EQ(c.intermediate_size, 4 * 48);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias || c.mlp_bias || c.norm_bias);
  EXPECT_EQ(files->tensor_shape("model.layers.1.self_attn.qkv_proj.weight"), (Shape{144, 48}));
  EXPECT_FALSE(files->has_tensor("model.layers.0.mlp.gate_proj.weight"));
}

TEST(GgufModelFiles, Qwen2IsNotPermuted) {
  const Bytes bytes = tiny_gguf("qwen2", /*permute=*/false, /*with_output=*/true);
  GgufModelFiles m(GgufFile::parse(bytes.data(), bytes.size(), "qwen.gguf"));
  EXPECT_EQ(m.config().architecture, "qwen2");
  EXPECT_FALSE(m.config().tie_word_embeddings);
  EXPECT_TRUE(m.has_tensor("lm_head.weight"));
  EXPECT_EQ(values(m.load_f32("model.layers.0.self_attn.q_proj.weight")), iota(64, 0));
  EXPECT_EQ(values(m.load_f32("model.layers.0.self_attn.k_proj.weight")), iota(32, 100));
}

TEST(GgufModelFiles, RejectsUnsupportedModels) {
  const auto expect_error = [](const Bytes& bytes, ErrorCode code, const std::string& needle) {
    try {
      GgufModelFiles m(GgufFile::parse(bytes.data(), bytes.size(), "m.gguf"));
      ADD_FAILURE() << "expected an error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(GgufBuilder().kv_str("general.architecture", "gpt2").build(), ErrorCode::kNotFound,
               "general.architecture is 'gpt2'");
  expect_error(GgufBuilder().kv_u32("x", 1).build(), ErrorCode::kNotFound,
               "'general.architecture' not found");
  expect_error(GgufBuilder().kv_str("general.architecture", "llama").build(), ErrorCode::kNotFound,
               "llama.embedding_length");
  GgufBuilder yarn;
  yarn.kv_str("general.architecture", "llama")
      .kv_u32("llama.context_length", 256)
      .kv_u32("llama.embedding_length", 8)
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.feed_forward_length", 16)
      .kv_u32("llama.attention.head_count", 2)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f)
      .kv_u32("llama.vocab_size", 5)
      .kv_str("llama.rope.scaling.type", "yarn");
  expect_error(yarn.build(), ErrorCode::kUnsupported, "rope.scaling.type 'yarn'");
  // Quantized type that cannot be dequantized: named at load.
  GgufBuilder q;
  q.kv_str("general.architecture", "llama")
      .kv_u32("llama.context_length", 256)
      .kv_u32("llama.embedding_length", 8)
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.feed_forward_length", 16)
      .kv_u32("llama.attention.head_count", 2)
      .kv_u32("llama.attention.head_count_kv", 2)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f)
      .kv_u32("llama.vocab_size", 5)
      .tensor("blk.0.ffn_up.weight", static_cast<uint32_t>(GgmlType::kQ5_K), {1, 256}, Bytes(176));
  const Bytes qb = q.build();
  GgufModelFiles m(GgufFile::parse(qb.data(), qb.size(), "q.gguf"));
  try {
    m.load_f32("model.layers.0.mlp.up_proj.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("'blk.0.ffn_up.weight') has type q5_K"), std::string::npos)
        << e.what();
  }
  // Heads that do not divide: validate() runs and the message names the file and field.
  GgufBuilder heads;
  heads.kv_str("general.architecture", "llama")
      .kv_u32("llama.context_length", 256)
      .kv_u32("llama.embedding_length", 12)
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.feed_forward_length", 16)
      .kv_u32("llama.attention.head_count", 3)
      .kv_u32("llama.attention.head_count_kv", 2)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f)
      .kv_u32("llama.vocab_size", 5);
  expect_error(heads.build(), ErrorCode::kInvalidFile,
               "m.gguf: model config: num_heads 3 is not a multiple of num_kv_heads 2");
}

// ---- the real model ----------------------------------------------------------------------------

TEST(SmolLM2, ConfigAndTensors) {
  INFLIGHT_REQUIRE_MODEL(path);
  auto files = ModelFiles::open(path);
  const ModelConfig& c = files->config();
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_theta, 100000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2}));
  EXPECT_EQ(files->tokenizer_path(), path);
  EXPECT_EQ(files->chat_template().rfind("{% for message in messages %}", 0), 0u);

  const auto names = files->tensor_names();
  EXPECT_EQ(names.size(), 272u);  // 30 x 9 + embeddings + final norm
  for (const auto& n : names) EXPECT_EQ(n.rfind("model.", 0), 0u) << n;  // all canonical
  EXPECT_EQ(files->tensor_shape("model.embed_tokens.weight"), (Shape{49152, 576}));
  EXPECT_EQ(files->tensor_shape("model.layers.0.self_attn.q_proj.weight"), (Shape{576, 576}));
  EXPECT_EQ(files->tensor_shape("model.layers.29.self_attn.k_proj.weight"), (Shape{192, 576}));
  EXPECT_EQ(files->tensor_shape("model.layers.0.self_attn.v_proj.weight"), (Shape{192, 576}));
  EXPECT_EQ(files->tensor_shape("model.layers.0.mlp.gate_proj.weight"), (Shape{1536, 576}));
  EXPECT_EQ(files->tensor_shape("model.layers.0.mlp.down_proj.weight"), (Shape{576, 1536}));
  EXPECT_EQ(files->tensor_shape("model.layers.0.input_layernorm.weight"), (Shape{576}));
  EXPECT_EQ(files->tensor_shape("model.norm.weight"), (Shape{576}));
  EXPECT_FALSE(files->has_tensor("lm_head.weight"));
}

// Values as the `gguf` package dequantises them, and q/k rows un-permuted with numpy.
TEST(SmolLM2, ValuesMatchGgufPythonPackage) {
  INFLIGHT_REQUIRE_MODEL(path);
  std::ifstream in(std::string(INFLIGHT_SOURCE_DIR) + "/tests/model/fixtures/smollm2_values.json");
  ASSERT_TRUE(in.good());
  const auto fixture = nlohmann::json::parse(in);
  if (fixture["model_size"].get<uint64_t>() != std::filesystem::file_size(path)) {
    GTEST_SKIP() << "skipped: " << path << " is not the model the fixture was made from";
  }
  auto files = ModelFiles::open(path);
  const auto check = [](const float* got, const nlohmann::json& want, const std::string& what) {
    for (size_t i = 0; i < want.size(); ++i) {
      const float w = want[i].get<float>();
      EXPECT_NEAR(got[i], w, 1e-6f * std::max(1.0f, std::abs(w))) << what << " [" << i << "]";
    }
  };
  for (const auto& v : fixture["values"]) {
    const std::string name = GgufModelFiles::canonical_name(v["name"].get<std::string>());
    const Tensor t = files->load_f32(name);
    check(t.data<float>(), v["first"], name);
    check(t.data<float>() + v["mid_offset"].get<int64_t>(), v["mid"], name + " middle");
  }
  for (const auto& r : fixture["qk_rows"]) {
    const std::string name = GgufModelFiles::canonical_name(r["name"].get<std::string>());
    const Tensor t = files->load_f32(name);
    check(t.data<float>() + r["row"].get<int64_t>() * t.size(1), r["first"],
          name + " row " + std::to_string(r["row"].get<int>()));
  }
}

// RoPE on pairs (2i, 2i+1) (llama.cpp's "normal" mode, what the GGUF layout is made for) or on
// halves (i, i + d/2) (Hugging Face rotate_half); both rotate pair i by pos * theta^(-2i/d).
std::vector<double> rope(const std::vector<double>& v, int64_t pos, double theta, bool halves) {
  const size_t d = v.size(), half = d / 2;
  std::vector<double> out(d);
  for (size_t i = 0; i < half; ++i) {
    const double a = pos * std::pow(theta, -2.0 * i / d);
    const size_t x = halves ? i : 2 * i, y = halves ? i + half : 2 * i + 1;
    out[x] = v[x] * std::cos(a) - v[y] * std::sin(a);
    out[y] = v[x] * std::sin(a) + v[y] * std::cos(a);
  }
  return out;
}

// W[rows, cols] x, per head of 64 rows.
std::vector<std::vector<double>> project(const float* w, const std::vector<float>& x, int64_t rows,
                                         int64_t head_dim) {
  std::vector<std::vector<double>> heads(rows / head_dim, std::vector<double>(head_dim));
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < x.size(); ++c) s += static_cast<double>(w[r * x.size() + c]) * x[c];
    heads[r / head_dim][r % head_dim] = s;
  }
  return heads;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Attention scores q.k must be the same whether RoPE pairs interleaved dims on the GGUF layout
// or halves on the un-permuted layout. Using halves on the GGUF layout must differ.
TEST(SmolLM2, UnpermutedQKGiveTheSameRopeScores) {
  INFLIGHT_REQUIRE_MODEL(path);
  GgufModelFiles files(GgufFile::open(path));
  const ModelConfig& c = files.config();
  const GgufFile& gguf = files.gguf();
  const auto raw = [&](const char* name) {
    const GgufTensorInfo& t = *gguf.find_tensor(name);
    Tensor out = Tensor::empty(t.shape, DType::kF32);
    dequantize(static_cast<GgmlType>(t.type), t.data, out.data<float>(), out.numel());
    return out;
  };
  for (int layer : {0, 17}) {
    SCOPED_TRACE(layer);
    const std::string blk = "blk." + std::to_string(layer) + ".";
    const std::string hf = "model.layers." + std::to_string(layer) + ".self_attn.";
    const Tensor qg = raw((blk + "attn_q.weight").c_str()),
                 kg = raw((blk + "attn_k.weight").c_str());
    const Tensor qh = files.load_f32(hf + "q_proj.weight"),
                 kh = files.load_f32(hf + "k_proj.weight");
    // Inputs: two embedding rows (token 100 for the query, 2000 for the key).
    const GgufTensorInfo& embd = *gguf.find_tensor("token_embd.weight");
    const size_t row_bytes = embd.nbytes / static_cast<size_t>(embd.shape[0]);
    std::vector<float> x(576), y(576);
    const auto et = static_cast<GgmlType>(embd.type);
    dequantize_row(et, embd.data + 100 * row_bytes, x.data(), 576);
    dequantize_row(et, embd.data + 2000 * row_bytes, y.data(), 576);
    const auto q_g = project(qg.data<float>(), x, 576, 64),
               k_g = project(kg.data<float>(), y, 192, 64);
    const auto q_h = project(qh.data<float>(), x, 576, 64),
               k_h = project(kh.data<float>(), y, 192, 64);
    double max_wrong = 0;
    for (auto [pq, pk] : {std::pair<int64_t, int64_t>{7, 3}, {100, 0}, {4000, 3999}}) {
      for (int64_t h = 0; h < c.num_heads; ++h) {
        const int64_t kvh = h / (c.num_heads / c.num_kv_heads);
        const double want =
            dot(rope(q_g[h], pq, c.rope_theta, false), rope(k_g[kvh], pk, c.rope_theta, false));
        const double got =
            dot(rope(q_h[h], pq, c.rope_theta, true), rope(k_h[kvh], pk, c.rope_theta, true));
        EXPECT_NEAR(got, want, 1e-9 * std::max(1.0, std::abs(want))) << "head " << h;
        const double wrong =
            dot(rope(q_g[h], pq, c.rope_theta, true), rope(k_g[kvh], pk, c.rope_theta, true));
        max_wrong = std::max(max_wrong, std::abs(wrong - want) / std::max(1.0, std::abs(want)));
      }
    }
    EXPECT_GT(max_wrong, 1e-3);  // the check is sensitive to the layout
  }
}

// Opening and dequantising every tensor must be quick (2 cores; ASan builds are slower).
TEST(SmolLM2, LoadsEverythingQuickly) {
  INFLIGHT_REQUIRE_MODEL(path);
  const auto start = std::chrono::steady_clock::now();
  auto files = ModelFiles::open(path);
  int64_t elements = 0;
  double checksum = 0;
  for (const auto& name : files->tensor_names()) {
    const Tensor t = files->load_f32(name);
    elements += t.numel();
    checksum += t.data<float>()[t.numel() - 1];
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ perf     ] opened and dequantised %lld elements in %.3f s (checksum %.4f)\n",
              static_cast<long long>(elements), seconds, checksum);
  EXPECT_EQ(elements, 134515008);  // SmolLM2-135M with tied embeddings
  EXPECT_TRUE(std::isfinite(checksum));
  EXPECT_LT(seconds, 30.0);
}

}  // namespace
}  // namespace inflight
