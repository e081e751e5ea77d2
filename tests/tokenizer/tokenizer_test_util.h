// Helpers for the tokenizer tests: shared data files (unpacking .xz into the build tree) and the
// llama.cpp test-vector format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace inflight::testing {

// The shared data file `rel` (under ../shared/data), unpacked if only `rel`.xz exists. The
// unpacked copy lives in <build>/test-data/ and is reused. Empty when the data is absent.
std::string shared_file(const std::string& rel);

// Reads a whole file (binary).
std::string read_file(const std::string& path);

// llama.cpp tokenizer vectors: inputs separated by "\n__ggml_vocab_test__\n" in `inp`, one line
// of space-separated ids per input in `out`.
struct TokenizerVector {
  std::string text;
  std::vector<int32_t> ids;
};
std::vector<TokenizerVector> read_vectors(const std::string& inp_path, const std::string& out_path);

}  // namespace inflight::testing
