// FP8 weights as stored: HfModelFiles::load_raw attaching scale tensors in each checkpoint
// layout (compressed-tensors per channel / per tensor with input scales, native block
// `weight_scale_inv`, ModelOpt with hf_quant_config.json), the shapes and types it refuses, and
// convert_rows / to_host_f32 dequantising e4m3 against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/fp8.h"
#include "file_builders.h"
#include "formats/hf_model_files.h"
#include "test_data.h"

namespace inflight {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::Bytes;

// e4m3 bytes and their values worked out by hand from the bit layout (s eeee mmm, bias 7):
// normal (8 + m) * 2^(e - 10), subnormal m * 2^-9.
const std::vector<std::pair<uint8_t, float>> kE4M3 = {
    {0x38, 1.0f},  {0x40, 2.0f},     {0x44, 3.0f},      {0xb8, -1.0f},
    {0x30, 0.5f},  {0x3c, 1.5f},     {0x7e, 448.0f},    {0x01, 0.001953125f},
    {0x00, 0.0f},  {0xfe, -448.0f},  {0x08, 0.015625f}, {0x8f, -0.029296875f},
    {0x53, 11.0f}, {0x29, 0.28125f}, {0xc6, -3.5f},     {0x5f, 30.0f}};

// n bytes cycling through kE4M3 (from `start`), and their hand values.
std::pair<Bytes, std::vector<float>> fp8_values(size_t n, size_t start = 0) {
  Bytes b;
  std::vector<float> v;
  for (size_t i = 0; i < n; ++i) {
    b.push_back(kE4M3[(start + i) % kE4M3.size()].first);
    v.push_back(kE4M3[(start + i) % kE4M3.size()].second);
  }
  return {b, v};
}

Bytes bf16_bytes(const std::vector<float>& v) {
  Bytes b;
  for (float x : v) testing::put<uint16_t>(b, f32_to_bf16(x));
  return b;
}

Bytes f16_bytes(const std::vector<float>& v) {
  Bytes b;
  for (float x : v) testing::put<uint16_t>(b, f32_to_f16(x));
  return b;
}

struct Entry {
  std::string name;
  std::string dtype;  // safetensors spelling
  Shape shape;
  Bytes data;
};

// A HF directory: the tiny fixture's config with `quantization_config` (null: none), the
// tensors in one model.safetensors, and hf_quant_config.json when given.
fs::path write_checkpoint(const std::string& name, const json& quantization_config,
                          const std::vector<Entry>& tensors, const json* hf_quant = nullptr) {
  const fs::path dir = testing::scratch_dir(name);
  std::ifstream in(fs::path(INFLIGHT_SOURCE_DIR) / "tests/model/fixtures/tiny_hf/config.json");
  json config = json::parse(in);
  if (!quantization_config.is_null()) config["quantization_config"] = quantization_config;
  testing::write_text(dir / "config.json", config.dump());
  if (hf_quant != nullptr) testing::write_text(dir / "hf_quant_config.json", hf_quant->dump());
  json header = json::object();
  Bytes data;
  for (const Entry& e : tensors) {
    header[e.name] = {{"dtype", e.dtype},
                      {"shape", e.shape},
                      {"data_offsets", {data.size(), data.size() + e.data.size()}}};
    data.insert(data.end(), e.data.begin(), e.data.end());
  }
  testing::write_file(dir / "model.safetensors", testing::safetensors_bytes(header.dump(), data));
  return dir;
}

json ct_config(const std::string& weights, bool dynamic) {
  return {{"quant_method", "compressed-tensors"},
          {"format", "float-quantized"},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}},
              {"weights", {{"type", "float"}, {"num_bits", 8}, {"strategy", weights}}},
              {"input_activations",
               {{"type", "float"},
                {"num_bits", 8},
                {"dynamic", dynamic},
                {"strategy", dynamic ? "token" : "tensor"}}}}}}},
          {"ignore", {"lm_head"}}};
}

const std::string kQ = "model.layers.0.self_attn.q_proj";

std::vector<float> host_values(const StoredTensor& t) {
  const Tensor x = to_host_f32(t);
  return std::vector<float>(x.data<float>(), x.data<float>() + x.numel());
}

void expect_load_error(const fs::path& dir, const std::string& tensor,
                       const std::vector<std::string>& needles) {
  auto m = HfModelFiles::open(dir.string());
  try {
    m->load_raw(tensor);
    ADD_FAILURE() << "loaded " << tensor;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidFile) << e.what();
    for (const std::string& n : needles) {
      EXPECT_NE(e.message().find(n), std::string::npos) << "'" << n << "' not in: " << e.what();
    }
  }
}

TEST(Fp8Table, MatchesHandValues) {
  for (const auto& [byte, value] : kE4M3) {
    EXPECT_EQ(e4m3_table()[byte], value) << int(byte);
    EXPECT_EQ(e4m3_to_f32(byte), value) << int(byte);
  }
  EXPECT_TRUE(std::isnan(e4m3_table()[0x7f]));
}

// compressed-tensors FP8_DYNAMIC: per-channel bf16 scales [N, 1], no input scale.
TEST(Fp8Weights, CompressedTensorsPerChannel) {
  const auto [w, hand] = fp8_values(8);  // [2, 4]
  const fs::path dir =
      write_checkpoint("fp8_ct_channel", ct_config("channel", true),
                       {{kQ + ".weight", "F8_E4M3", {2, 4}, w},
                        {kQ + ".weight_scale", "BF16", {2, 1}, bf16_bytes({0.5f, 3.0f})},
                        {"lm_head.weight", "BF16", {1, 4}, bf16_bytes({1, 2, 3, 4})}});
  auto m = HfModelFiles::open(dir.string());
  EXPECT_EQ(m->config().quantization.source, "compressed-tensors");
  const StoredTensor t = m->load_raw(kQ + ".weight");
  EXPECT_EQ(t.type, StoredType::kF8E4M3);
  ASSERT_NE(t.scale, nullptr);
  EXPECT_EQ(t.scale->name, kQ + ".weight_scale");
  EXPECT_EQ(t.block_rows, 0);
  EXPECT_EQ(t.input_scale, nullptr);
  EXPECT_FALSE(t.is_plain(DType::kF32));
  // {1, 2, 3, -1} * 0.5 and {0.5, 1.5, 448, 2^-9} * 3
  EXPECT_EQ(host_values(t),
            (std::vector<float>{0.5f, 1.0f, 1.5f, -0.5f, 1.5f, 4.5f, 1344.0f, 0.005859375f}));
  const StoredTensor head = m->load_raw("lm_head.weight");  // unquantized: as before
  EXPECT_EQ(head.scale, nullptr);
  EXPECT_EQ(host_values(head), (std::vector<float>{1, 2, 3, 4}));
  // Scales are tensors of their own too.
  EXPECT_EQ(m->load_raw(kQ + ".weight_scale").scale, nullptr);
}

// compressed-tensors FP8 static: one f32 weight scale [1] and a static input_scale [1].
TEST(Fp8Weights, CompressedTensorsPerTensorStatic) {
  const auto [w, hand] = fp8_values(12, 3);  // [3, 4]
  const fs::path dir =
      write_checkpoint("fp8_ct_tensor", ct_config("tensor", false),
                       {{kQ + ".weight", "F8_E4M3", {3, 4}, w},
                        {kQ + ".weight_scale", "F32", {1}, testing::f32_bytes({0.25f})},
                        {kQ + ".input_scale", "F32", {1}, testing::f32_bytes({0.0625f})}});
  auto m = HfModelFiles::open(dir.string());
  const StoredTensor t = m->load_raw(kQ + ".weight");
  ASSERT_NE(t.scale, nullptr);
  ASSERT_NE(t.input_scale, nullptr);
  EXPECT_EQ(t.input_scale->name, kQ + ".input_scale");
  EXPECT_EQ(host_values(*t.input_scale), std::vector<float>{0.0625f});
  const std::vector<float> got = host_values(t);
  ASSERT_EQ(got.size(), hand.size());
  for (size_t i = 0; i < hand.size(); ++i) EXPECT_EQ(got[i], hand[i] * 0.25f) << i;
}

// Native block FP8 (weight_scale_inv): a [5, 7] weight in 2x4 blocks -> scales [3, 2], f16.
TEST(Fp8Weights, NativeBlockScales) {
  const json qc = {
      {"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {2, 4}}};
  const auto [w, hand] = fp8_values(35, 5);
  const std::vector<float> s = {0.5f, 2.0f, 0.25f, 4.0f, 8.0f, 0.125f};  // [3, 2]
  const fs::path dir = write_checkpoint("fp8_native_block", qc,
                                        {{kQ + ".weight", "F8_E4M3", {5, 7}, w},
                                         {kQ + ".weight_scale_inv", "F16", {3, 2}, f16_bytes(s)}});
  auto m = HfModelFiles::open(dir.string());
  const StoredTensor t = m->load_raw(kQ + ".weight");
  EXPECT_EQ(t.block_rows, 2);
  EXPECT_EQ(t.block_cols, 4);
  ASSERT_NE(t.scale, nullptr);
  std::vector<float> want(35);
  for (int r = 0; r < 5; ++r) {
    for (int c = 0; c < 7; ++c) want[r * 7 + c] = hand[r * 7 + c] * s[(r / 2) * 2 + c / 4];
  }
  EXPECT_EQ(host_values(t), want);
  // A row range, into bf16 and f16: the same values rounded once.
  for (const DType dt : {DType::kBF16, DType::kF16}) {
    std::vector<uint16_t> out(2 * 7);
    convert_rows(t, 2, 4, dt, out.data());
    for (int i = 0; i < 14; ++i) {
      const float v = want[14 + i];
      EXPECT_EQ(out[i], dt == DType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v)) << i;
    }
  }
}

// ModelOpt: hf_quant_config.json, scalar weight and input scales, k/v scales present.
TEST(Fp8Weights, ModelOptDirectory) {
  const json hq = {
      {"producer", {{"name", "modelopt"}}},
      {"quantization",
       {{"quant_algo", "FP8"}, {"kv_cache_quant_algo", "FP8"}, {"exclude_modules", {"lm_head"}}}}};
  const auto [w, hand] = fp8_values(4, 9);
  const fs::path dir = write_checkpoint(
      "fp8_modelopt", nullptr,
      {{kQ + ".weight", "F8_E4M3", {1, 4}, w},
       {kQ + ".weight_scale", "F32", {}, testing::f32_bytes({2.0f})},
       {kQ + ".input_scale", "BF16", {}, bf16_bytes({0.5f})},
       {"model.layers.0.self_attn.k_proj.k_scale", "F32", {}, testing::f32_bytes({1.0f})},
       {"model.layers.0.self_attn.v_proj.v_scale", "F32", {}, testing::f32_bytes({1.0f})}},
      &hq);
  auto m = HfModelFiles::open(dir.string());
  const Quantization& q = m->config().quantization;
  EXPECT_EQ(q.source, "modelopt");
  EXPECT_TRUE(q.kv_cache_scales);
  const StoredTensor t = m->load_raw(kQ + ".weight");
  ASSERT_NE(t.input_scale, nullptr);
  EXPECT_EQ(host_values(*t.input_scale), std::vector<float>{0.5f});
  EXPECT_EQ(host_values(t),
            (std::vector<float>{hand[0] * 2, hand[1] * 2, hand[2] * 2, hand[3] * 2}));
}

TEST(Fp8WeightsRefused, ScaleShapesAndTypes) {
  const auto [w, hand] = fp8_values(8);
  const auto with_scale = [&](const std::string& name, const json& qc, Entry scale,
                              std::vector<Entry> more = {}) {
    more.insert(more.begin(), {kQ + ".weight", "F8_E4M3", {2, 4}, w});
    more.push_back(std::move(scale));
    return write_checkpoint(name, qc, more);
  };
  const std::string scale = kQ + ".weight_scale";
  expect_load_error(with_scale("fp8_bad_channel", ct_config("channel", true),
                               {scale, "F32", {3}, testing::f32_bytes({1, 1, 1})}),
                    kQ + ".weight",
                    {"'" + scale + "'", "'" + kQ + ".weight'", "[2, 4]", "has shape [3]",
                     "expected [2] or [2, 1]"});
  expect_load_error(with_scale("fp8_bad_tensor", ct_config("tensor", true),
                               {scale, "F32", {2}, testing::f32_bytes({1, 1})}),
                    kQ + ".weight", {"has shape [2]", "expected [] or [1]"});
  const json block = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  expect_load_error(
      with_scale("fp8_bad_block", block,
                 {kQ + ".weight_scale_inv", "F32", {2, 1}, testing::f32_bytes({1, 1})}),
      kQ + ".weight", {".weight_scale_inv'", "has shape [2, 1]", "expected [1, 1]"});
  expect_load_error(
      with_scale("fp8_block_named_scale", block, {scale, "F32", {1, 1}, testing::f32_bytes({1})}),
      kQ + ".weight", {"has no scale tensor '" + kQ + ".weight_scale_inv'"});
  expect_load_error(with_scale("fp8_i8_scale", ct_config("tensor", true), {scale, "I8", {1}, {1}}),
                    kQ + ".weight", {"'" + scale + "'", "is i8", "f32, bf16 or f16"});
  expect_load_error(with_scale("fp8_input_2", ct_config("tensor", false),
                               {scale, "F32", {1}, testing::f32_bytes({1})},
                               {{kQ + ".input_scale", "F32", {2}, testing::f32_bytes({1, 1})}}),
                    kQ + ".weight", {"'" + kQ + ".input_scale'", "has shape [2]", "one element"});
  expect_load_error(with_scale("fp8_no_input", ct_config("tensor", false),
                               {scale, "F32", {1}, testing::f32_bytes({1})}),
                    kQ + ".weight", {"has no scale tensor '" + kQ + ".input_scale'"});
}

TEST(Fp8WeightsRefused, MissingScaleOrConfig) {
  const auto [w, hand] = fp8_values(8);
  const Entry weight = {kQ + ".weight", "F8_E4M3", {2, 4}, w};
  expect_load_error(
      write_checkpoint("fp8_no_scale", ct_config("channel", true), {weight}), kQ + ".weight",
      {"FP8 weight '" + kQ + ".weight' has no scale tensor '" + kQ + ".weight_scale'"});
  expect_load_error(
      write_checkpoint("fp8_no_config", nullptr,
                       {weight, {kQ + ".weight_scale", "F32", {1}, testing::f32_bytes({1})}}),
      kQ + ".weight", {"'" + kQ + ".weight' is F8_E4M3", "declares no quantization"});
  json ignoring = ct_config("tensor", true);
  ignoring["ignore"] = {"q_proj"};
  expect_load_error(
      write_checkpoint("fp8_ignored", ignoring,
                       {weight, {kQ + ".weight_scale", "F32", {1}, testing::f32_bytes({1})}}),
      kQ + ".weight", {"leaves '" + kQ + "' unquantized"});
  expect_load_error(
      write_checkpoint("fp8_not_weight", ct_config("tensor", true),
                       {{"model.layers.0.self_attn.k_scale", "F8_E4M3", {1}, {0x38}}}),
      "model.layers.0.self_attn.k_scale", {"is not a linear weight"});
  expect_load_error(write_checkpoint("fp8_3d", ct_config("tensor", true),
                                     {{kQ + ".weight", "F8_E4M3", {2, 2, 2}, w},
                                      {kQ + ".weight_scale", "F32", {1}, testing::f32_bytes({1})}}),
                    kQ + ".weight", {"has shape [2, 2, 2]"});
}

TEST(Fp8WeightsRefused, BadQuantConfigAtOpen) {
  const json hq = {{"quantization", {{"quant_algo", "NVFP4"}}}};
  const fs::path dir = write_checkpoint("fp8_nvfp4", nullptr, {}, &hq);
  try {
    HfModelFiles::open(dir.string());
    ADD_FAILURE() << "NVFP4 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(e.message().find("hf_quant_config.json: quantization.quant_algo is \"NVFP4\""),
              std::string::npos)
        << e.what();
  }
}

// convert_rows on StoredTensors made in memory: per-row f32 scales, and the checks it keeps.
TEST(Fp8Convert, InMemoryScales) {
  const auto [w, hand] = fp8_values(6, 10);  // [3, 2]
  const std::vector<float> rows = {0.5f, 2.0f, -4.0f};
  auto scale = std::make_shared<StoredTensor>();
  const Bytes sb = testing::f32_bytes(rows);
  scale->name = "s";
  scale->shape = {3};
  scale->type = StoredType::kF32;
  scale->data = sb.data();
  StoredTensor t;
  t.name = "w";
  t.shape = {3, 2};
  t.type = StoredType::kF8E4M3;
  t.data = w.data();
  EXPECT_THROW(to_host_f32(t), Error);  // no scale
  t.scale = scale;
  std::vector<float> want;
  for (int i = 0; i < 6; ++i) want.push_back(hand[i] * rows[i / 2]);
  EXPECT_EQ(host_values(t), want);
  std::vector<float> two(2);
  convert_rows(t, 2, 3, DType::kF32, two.data());
  EXPECT_EQ(two, (std::vector<float>{want[4], want[5]}));
  scale->shape = {2};  // neither one scale nor one per row
  try {
    to_host_f32(t);
    ADD_FAILURE() << "accepted 2 scales for 3 rows";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("'s'"), std::string::npos) << e.what();
  }
  scale->shape = {3};
  t.block_rows = 2;  // block sizes must come in pairs, and the grid must fit
  EXPECT_THROW(to_host_f32(t), Error);
  t.block_cols = 2;
  EXPECT_THROW(to_host_f32(t), Error);  // [2, 1] expected
  scale->shape = {2, 1};
  scale->data = sb.data();
  // Row r is in block row r / 2: rows 0-1 scale by 0.5, row 2 by 2.
  EXPECT_EQ(host_values(t)[2], hand[2] * rows[0]);
  EXPECT_EQ(host_values(t)[4], hand[4] * rows[1]);
}

}  // namespace
}  // namespace inflight
