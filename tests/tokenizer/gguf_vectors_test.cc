// llama.cpp's tokenizer vectors (test-tokenizer-0): every input of every vocabulary must encode
// to exactly the expected ids, with add_special = false and parse_special = false as there.
#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "test_data.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"

namespace inflight {
namespace {

class GgufVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufVectors, AllVectorsEncodeExactly) {
  const std::string base = "tokenizers/gguf-vocab/ggml-vocab-" + GetParam() + ".gguf";
  const std::string vocab = testing::shared_file(base);
  INFLIGHT_REQUIRE_DATA(inp, base + ".inp");
  INFLIGHT_REQUIRE_DATA(out, base + ".out");
  ASSERT_FALSE(vocab.empty()) << "cannot unpack " << base << ".xz";
  const auto tok = Tokenizer::from_path(vocab);
  const auto vectors = testing::read_vectors(inp, out);
  ASSERT_GT(vectors.size(), 30u) << "vector files do not pair up";
  size_t failed = 0;
  for (const auto& v : vectors) {
    const std::vector<int32_t> got = tok->encode(v.text, false, false);
    if (got != v.ids) {
      ++failed;
      ADD_FAILURE() << GetParam() << ": '" << v.text << "'\n  want " << fmt::format("{}", v.ids)
                    << "\n  got  " << fmt::format("{}", got);
    }
  }
  std::printf("%s: %zu/%zu vectors pass\n", GetParam().c_str(), vectors.size() - failed,
              vectors.size());
}

INSTANTIATE_TEST_SUITE_P(Vocabs, GgufVectors,
                         ::testing::Values("llama-spm", "llama-bpe", "phi-3", "qwen2", "gpt-2",
                                           "starcoder", "deepseek-llm", "deepseek-coder", "falcon",
                                           "mpt", "refact"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// The original GPT-2 files (encoder.json + vocab.bpe) must tokenize like the gpt-2 vectors say.
TEST(Gpt2Files, PassTheGpt2Vectors) {
  const std::string base = "tokenizers/gguf-vocab/ggml-vocab-gpt-2.gguf";
  INFLIGHT_REQUIRE_DATA(inp, base + ".inp");
  INFLIGHT_REQUIRE_DATA(out, base + ".out");
  INFLIGHT_REQUIRE_DATA(merges, "tokenizers/gpt2/vocab.bpe");
  const std::string encoder = testing::shared_file("tokenizers/gpt2/encoder.json");
  ASSERT_FALSE(encoder.empty());
  const auto dir = testing::scratch_dir("gpt2_files");
  std::filesystem::copy_file(encoder, dir / "encoder.json");
  std::filesystem::copy_file(merges, dir / "vocab.bpe");
  const auto tok = Tokenizer::from_path(dir.string());
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->eos_id(), 50256);
  for (const auto& v : testing::read_vectors(inp, out)) {
    EXPECT_EQ(tok->encode(v.text, false, false), v.ids) << v.text;
    EXPECT_EQ(tok->decode(v.ids, false), v.text);
  }
}

}  // namespace
}  // namespace inflight
