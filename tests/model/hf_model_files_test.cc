// HfModelFiles and ModelFiles::open on Hugging Face directories: the sharded fixture written by
// the `safetensors` package, a single-file model written here, and broken directories.
#include "formats/hf_model_files.h"

#include "formats/mpt_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "file_builders.h"
#include "model/registry.h"
#include "test_data.h"

namespace inflight {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::Bytes;

const fs::path kTinyHf = fs::path(INFLIGHT_SOURCE_DIR) / "tests/model/fixtures/tiny_hf";

// The fixture's tensors in make_gguf_fixture.py order; value k of tensor t is
// ((k % 17) - 8) / 8 + t.
const std::vector<std::pair<std::string, Shape>> kTinyTensors = {
    {"model.embed_tokens.weight", {32, 8}},
    {"model.layers.0.input_layernorm.weight", {8}},
    {"model.layers.0.self_attn.q_proj.weight", {8, 8}},
    {"model.layers.0.self_attn.k_proj.weight", {4, 8}},
    {"model.layers.0.self_attn.v_proj.weight", {4, 8}},
    {"model.layers.0.self_attn.o_proj.weight", {8, 8}},
    {"model.layers.0.post_attention_layernorm.weight", {8}},
    {"model.layers.0.mlp.gate_proj.weight", {16, 8}},
    {"model.layers.0.mlp.up_proj.weight", {16, 8}},
    {"model.layers.0.mlp.down_proj.weight", {8, 16}},
    {"model.norm.weight", {8}},
};

// A copy of the fixture to break.
fs::path tiny_copy(const std::string& name) {
  const fs::path dir = testing::scratch_dir(name);
  fs::copy(kTinyHf, dir, fs::copy_options::recursive);
  return dir;
}

void expect_open_error(const fs::path& dir, ErrorCode code, const std::string& needle) {
  try {
    ModelFiles::open(dir.string());
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(HfModelFiles, ShardedFixture) {
  auto m = ModelFiles::open(kTinyHf.string());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");  // as the file says; the registry resolves it
  EXPECT_EQ(c.hidden_size, 8);
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m->tensor_names().size(), kTinyTensors.size());
  EXPECT_FALSE(m->has_tensor("lm_head.weight"));
  for (size_t t = 0; t < kTinyTensors.size(); ++t) {
    const auto& [name, shape] = kTinyTensors[t];
    SCOPED_TRACE(name);
    ASSERT_TRUE(m->has_tensor(name));
    EXPECT_EQ(m->tensor_shape(name), shape);
    const Tensor x = m->load_f32(name);  // odd t were stored as f16, even as f32
    ASSERT_EQ(x.shape(), shape);
    for (int64_t k = 0; k < x.numel(); ++k) {
      ASSERT_EQ(x.data<float>()[k], static_cast<float>((k % 17) - 8) / 8.0f + t) << k;
    }
  }
  EXPECT_EQ(m->chat_template(), "{{ messages }}");  // the list entry named "default"
  EXPECT_EQ(m->tokenizer_path(), (kTinyHf / "tokenizer.json").string());
  EXPECT_THROW(m->load_f32("lm_head.weight"), Error);
}

TEST(HfModelFiles, SingleFileWithBf16AndTemplateFile) {
  const fs::path dir = testing::scratch_dir("hf_single");
  fs::copy_file(kTinyHf / "config.json", dir / "config.json");
  Bytes data;
  for (float v : {1.0f, 2.0f, -3.0f, 0.375f}) testing::put<uint16_t>(data, f32_to_bf16(v));
  testing::write_file(
      dir / "model.safetensors",
      testing::safetensors_bytes(
          R"({"model.norm.weight": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}})",
          data));
  testing::write_text(dir / "chat_template.jinja", "{{ bos_token }}");
  auto m = ModelFiles::open(dir.string());
  const Tensor x = m->load_f32("model.norm.weight");
  EXPECT_EQ(std::vector<float>(x.data<float>(), x.data<float>() + 4),
            (std::vector<float>{1.0f, 2.0f, -3.0f, 0.375f}));
  EXPECT_EQ(m->chat_template(), "{{ bos_token }}");
  EXPECT_EQ(m->tokenizer_path(), "");  // no tokenizer.json here
}

// The real Llama 3.1 tokenizer_config.json: its chat template is a plain string.
// MPT's "transformer.*" tensors come out under the canonical names (formats/mpt_config.h).
TEST(HfModelFiles, MptTensorsUnderCanonicalNames) {
  const auto files = HfModelFiles::open(
      (fs::path(INFLIGHT_SOURCE_DIR) / "tests/golden/fixtures/tiny-mpt-bias").string());
  EXPECT_EQ(files->config().architecture, "mpt");
  EXPECT_EQ(files->tensor_shape("model.embed_tokens.weight"), (Shape{151, 48}));
  EXPECT_EQ(files->tensor_shape("model.layers.0.self_attn.qkv_proj.weight"), (Shape{144, 48}));
  EXPECT_EQ(files->tensor_shape("model.layers.1.self_attn.qkv_proj.bias"), (Shape{144}));
  EXPECT_EQ(files->tensor_shape("model.layers.1.mlp.up_proj.bias"), (Shape{192}));
  EXPECT_EQ(files->tensor_shape("model.layers.0.input_layernorm.bias"), (Shape{48}));
  EXPECT_EQ(files->tensor_shape("model.norm.bias"), (Shape{48}));
  EXPECT_FALSE(files->has_tensor("transformer.wte.weight"));
  EXPECT_EQ(mpt_canonical_name("transformer.blocks.12.ffn.down_proj.weight"),
            "model.layers.12.mlp.down_proj.weight");
  EXPECT_EQ(mpt_canonical_name("transformer.blocks.x.norm_1.weight"),
            "transformer.blocks.x.norm_1.weight");
  EXPECT_EQ(mpt_canonical_name("lm_head.weight"), "lm_head.weight");
}

TEST(HfModelFiles, ChatTemplateFromRealTokenizerConfig) {
  INFLIGHT_REQUIRE_DATA(tok_dir, "tokenizers/hf/llama3_1");
  const fs::path dir = tiny_copy("hf_real_template");
  fs::copy_file(fs::path(tok_dir) / "tokenizer_config.json", dir / "tokenizer_config.json",
                fs::copy_options::overwrite_existing);
  std::ifstream in(dir / "tokenizer_config.json");
  const json cfg = json::parse(in);
  ASSERT_TRUE(cfg["chat_template"].is_string());
  auto m = ModelFiles::open(dir.string());
  EXPECT_EQ(m->chat_template(), cfg["chat_template"].get<std::string>());
  EXPECT_NE(m->chat_template().find("<|start_header_id|>"), std::string::npos);
}

TEST(HfModelFilesBroken, MissingPieces) {
  expect_open_error("/nonexistent/model", ErrorCode::kNotFound, "does not exist");
  const fs::path empty = testing::scratch_dir("hf_empty");
  expect_open_error(empty, ErrorCode::kNotFound, "has no config.json");
  const fs::path no_weights = testing::scratch_dir("hf_no_weights");
  fs::copy_file(kTinyHf / "config.json", no_weights / "config.json");
  expect_open_error(no_weights, ErrorCode::kNotFound, "neither model.safetensors");
  const fs::path missing_shard = tiny_copy("hf_missing_shard");
  fs::remove(missing_shard / "model-00002-of-00002.safetensors");
  expect_open_error(missing_shard, ErrorCode::kNotFound, "model-00002-of-00002.safetensors");
}

TEST(HfModelFilesBroken, BadIndexAndConfig) {
  const auto edit_json = [](const fs::path& path, auto mutate) {
    std::ifstream in(path);
    json j = json::parse(in);
    in.close();
    mutate(j);
    testing::write_text(path, j.dump());
  };
  const fs::path wrong_shard = tiny_copy("hf_wrong_shard");
  edit_json(wrong_shard / "model.safetensors.index.json", [](json& j) {
    j["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";
  });
  expect_open_error(wrong_shard, ErrorCode::kInvalidFile,
                    "tensor 'model.norm.weight' is not in shard 'model-00001-of-00002");
  const fs::path escape = tiny_copy("hf_escape");
  edit_json(escape / "model.safetensors.index.json",
            [](json& j) { j["weight_map"]["model.norm.weight"] = "../../etc/passwd"; });
  expect_open_error(escape, ErrorCode::kInvalidFile, "is not a file name in the directory");
  const fs::path not_json = tiny_copy("hf_not_json");
  testing::write_text(not_json / "model.safetensors.index.json", "{\"weight_map\": ");
  expect_open_error(not_json, ErrorCode::kInvalidFile, "not valid JSON");
  const fs::path bad_config = tiny_copy("hf_bad_config");
  edit_json(bad_config / "config.json", [](json& j) { j["num_hidden_layers"] = "one"; });
  expect_open_error(bad_config, ErrorCode::kInvalidFile, "'num_hidden_layers' must be an integer");
  const fs::path arch = tiny_copy("hf_arch");
  edit_json(arch / "config.json", [](json& j) { j["architectures"] = {"FalconForCausalLM"}; });
  // The files open; the architecture registry refuses the architecture, naming it.
  try {
    resolve_architecture(ModelFiles::open(arch.string())->config());
    ADD_FAILURE() << "FalconForCausalLM was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("'FalconForCausalLM'"), std::string::npos) << e.what();
  }
  const fs::path bad_template = tiny_copy("hf_bad_template");
  edit_json(bad_template / "tokenizer_config.json", [](json& j) {
    j["chat_template"] = {{{"name", "tool_use"}, {"template", "x"}}};
  });
  expect_open_error(bad_template, ErrorCode::kInvalidFile, "without a template named 'default'");
}

TEST(ModelFilesOpen, RejectsOtherFiles) {
  const fs::path dir = testing::scratch_dir("open_other");
  testing::write_text(dir / "notes.txt", "hello");
  expect_open_error(dir / "notes.txt", ErrorCode::kInvalidFile, "neither a GGUF file");
  fs::copy_file(kTinyHf / "model-00001-of-00002.safetensors", dir / "m.safetensors");
  expect_open_error(dir / "m.safetensors", ErrorCode::kInvalidArgument, "pass the directory");
}

}  // namespace
}  // namespace inflight
