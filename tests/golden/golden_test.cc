// Logits and greedy continuations against Hugging Face transformers (fp32), from the fixtures
// that make_golden.py wrote: tiny random Llama / Qwen2 / Mistral / Qwen3 / Mixtral / Qwen3-MoE /
// MPT models loaded from their safetensors directories (MPT also with every bias, clip_qkv and
// softmax_scale), the Qwen3 / Mixtral / Qwen3-MoE / MPT ones also from GGUF files named as
// llama.cpp names them (same weights, same golden logits), and
// SmolLM2-135M loaded from the GGUF (the reference used the same dequantised weights).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "formats/model_files.h"
#include "model/llama.h"
#include "model/registry.h"
#include "test_data.h"

namespace inflight {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kLogitsRelTol = 1e-4;  // fp32 against fp32 (GUIDE section 4)

fs::path fixtures() {
  return fs::path(INFLIGHT_SOURCE_DIR) / "tests" / "golden" / "fixtures";
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << "cannot read " << p;
  return json::parse(in);
}

// Feeds one sequence through the model with a paged cache: the prompt in one step (logits at
// the golden positions), then greedy decode steps. Checks both against the golden case.
void check_case(Model& model, const json& c, int32_t block_size, const std::string& what) {
  const auto prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
  const auto positions = c.at("logits_positions").get<std::vector<int32_t>>();
  const auto golden_rows = c.at("logits").get<std::vector<std::vector<double>>>();
  const auto golden_greedy = c.at("greedy_ids").get<std::vector<int32_t>>();
  std::vector<int64_t> columns;
  if (c.contains("logits_columns")) {
    columns = c.at("logits_columns").get<std::vector<int64_t>>();
  } else {
    for (int64_t i = 0; i < model.config().vocab_size; ++i) columns.push_back(i);
  }
  const int64_t vocab = model.config().vocab_size;
  const int32_t total = static_cast<int32_t>(prompt.size() + golden_greedy.size());
  const int64_t num_blocks = (total + block_size - 1) / block_size + 1;
  KvCache cache = model.make_kv_cache(num_blocks, block_size);
  // Blocks in reverse order: a non-trivial table.
  std::vector<int32_t> table(static_cast<size_t>(num_blocks));
  for (int64_t i = 0; i < num_blocks; ++i)
    table[static_cast<size_t>(i)] = static_cast<int32_t>(num_blocks - 1 - i);

  std::vector<int32_t> tokens = prompt;
  auto step = [&](int32_t begin, int32_t end, const std::vector<int32_t>& logits_rows) {
    ForwardBatch b;
    for (int32_t pos = begin; pos < end; ++pos) {
      b.token_ids.push_back(tokens[static_cast<size_t>(pos)]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(static_cast<int64_t>(table[static_cast<size_t>(pos / block_size)]) *
                                   block_size +
                               pos % block_size);
    }
    b.query_start = {0, end - begin};
    b.context_lens = {end};
    b.block_tables = table;
    b.max_blocks_per_seq = static_cast<int32_t>(num_blocks);
    for (int32_t pos : logits_rows) b.logits_indices.push_back(pos - begin);
    return model.forward(b, cache);
  };

  const Tensor logits = step(0, static_cast<int32_t>(prompt.size()), positions);
  ASSERT_EQ(logits.size(0), static_cast<int64_t>(positions.size()));
  double worst = 0.0;
  for (size_t r = 0; r < positions.size(); ++r) {
    const float* row = logits.data<float>() + static_cast<int64_t>(r) * vocab;
    double max_ref = 0.0, max_err = 0.0;
    for (size_t i = 0; i < columns.size(); ++i) {
      const double ref = golden_rows[r][i], got = row[columns[i]];
      ASSERT_FALSE(std::isnan(got)) << what << ": NaN logit";
      max_ref = std::max(max_ref, std::abs(ref));
      max_err = std::max(max_err, std::abs(got - ref));
    }
    const double rel = max_err / max_ref;
    worst = std::max(worst, rel);
    EXPECT_LT(rel, kLogitsRelTol) << what << ": logits at position " << positions[r];
  }
  ::testing::Test::RecordProperty("max_rel_error_" + what, fmt::format("{:.2e}", worst));

  // Greedy continuation: the prompt's last row, then one decode step per token.
  ASSERT_EQ(positions.back(), static_cast<int32_t>(prompt.size()) - 1)
      << what << ": golden rows must include the prompt's last position";
  Tensor last = logits.rows(logits.size(0) - 1, logits.size(0));
  std::vector<int32_t> generated;
  for (size_t i = 0; i < golden_greedy.size(); ++i) {
    const float* row = last.data<float>();
    tokens.push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
    generated.push_back(tokens.back());
    if (i + 1 < golden_greedy.size()) {
      const auto n = static_cast<int32_t>(tokens.size());
      last = step(n - 1, n, {n - 1});
    }
  }
  EXPECT_EQ(generated, golden_greedy) << what << ": greedy continuation differs";
}

class TinyGolden : public ::testing::TestWithParam<std::string> {};

// The model at `path` (a directory or a GGUF file) against the golden cases of `name`.
void check_tiny(const std::string& name, const fs::path& path, const std::string& label) {
  const json golden = read_json(fixtures() / name / "golden.json");
  const auto files = ModelFiles::open(path.string());
  CpuBackend backend;
  const std::unique_ptr<Model> model_owner = load_model(*files, backend);
  Model& model = *model_owner;
  int32_t block_size = 1;
  for (const json& c : golden.at("cases")) {
    check_case(model, c, block_size, label + "/len" + std::to_string(c.at("prompt_ids").size()));
    block_size = block_size == 1 ? 3 : 16;  // page sizes 1, 3, 16 across the cases
  }
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

TEST_P(TinyGolden, LogitsAndGreedyMatchTransformers) {
  check_tiny(GetParam(), fixtures() / GetParam(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TinyGolden,
                         ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-mistral", "tiny-qwen3",
                                           "tiny-mixtral", "tiny-qwen3-moe", "tiny-mpt",
                                           "tiny-mpt-bias"),
                         test_name);

// The same weights written as GGUF (f32) the way llama.cpp's converter writes them: per-head
// q/k norms (attn_q_norm / attn_k_norm), stacked experts (ffn_*_exps, router ffn_gate_inp),
// Mixtral as `llama` with experts and its q/k rows permuted.
class TinyGgufGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyGgufGolden, LogitsAndGreedyMatchTransformers) {
  check_tiny(GetParam(), fixtures() / (GetParam() + ".gguf"), GetParam() + ".gguf");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TinyGgufGolden,
                         ::testing::Values("tiny-qwen3", "tiny-mixtral", "tiny-qwen3-moe",
                                           "tiny-mpt"),
                         test_name);

TEST(SmolLM2Golden, LogitsAndGreedyMatchTransformersOnDequantisedWeights) {
  INFLIGHT_REQUIRE_MODEL(path);
  const json golden = read_json(fixtures() / "smollm2-135m-q4_1.json");
  const auto expected_size = golden.at("model_file_size").get<uintmax_t>();
  if (fs::file_size(path) != expected_size) {
    GTEST_SKIP() << "skipped: " << path << " is not the file the fixtures were made from ("
                 << golden.at("source").get<std::string>() << ", " << expected_size << " bytes)";
  }
  const auto files = ModelFiles::open(path);
  CpuBackend backend;
  const std::unique_ptr<Model> model_owner = load_model(*files, backend);
  Model& model = *model_owner;
  int index = 0;
  for (const json& c : golden.at("cases")) {
    check_case(model, c, index == 1 ? 3 : 16, "smollm2/prompt" + std::to_string(index));
    ++index;
  }
}

}  // namespace
}  // namespace inflight
