// The paged KV cache is right when the schedule does not matter: the same tokens through
// prefill at once, chunked prefill, token-by-token decode, alone or batched with other
// sequences, over random non-contiguous block tables and page sizes 1, 3 and 16, give the same
// logits within fp32 rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "backend/cpu/cpu_backend.h"
#include "backend/dense_reference.h"
#include "backend/tiny_llama.h"
#include "formats/model_files.h"
#include "model/registry.h"
#include "test_data.h"

namespace inflight {
namespace {

using testing::make_step;
using testing::random_tokens;
using testing::RandomBlocks;
using testing::SeqState;

constexpr double kScheduleRelTol = 1e-5;

// max |a - b| / max |b| over n elements; NaN counts as a mismatch.
double rel_diff(const float* a, const float* b, int64_t n) {
  double max_ref = 0.0, max_err = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    max_ref = std::max(max_ref, std::abs(static_cast<double>(b[i])));
    max_err = std::max(max_err, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return max_err / std::max(max_ref, 1e-30);
}

// Runs one sequence through the model in chunks of `chunk` tokens on a fresh cache with
// random blocks; returns its logits [tokens, vocab], row i for position i.
std::vector<float> run_chunked(Model& model, const std::vector<int32_t>& tokens, int32_t chunk,
                               int32_t block_size, uint32_t seed) {
  const int64_t num_blocks = 2 * (static_cast<int64_t>(tokens.size()) / block_size + 2);
  KvCache cache = model.make_kv_cache(num_blocks, block_size);
  RandomBlocks pool(num_blocks, seed);
  SeqState seq{tokens, {}, 0};
  std::vector<float> logits;
  while (seq.computed < static_cast<int32_t>(tokens.size())) {
    const int32_t n = std::min<int32_t>(chunk, static_cast<int32_t>(tokens.size()) - seq.computed);
    const Tensor out = model.forward(make_step({{&seq, n}}, block_size, pool), cache);
    logits.insert(logits.end(), out.data<float>(), out.data<float>() + out.numel());
  }
  return logits;
}

int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

class PagedConsistency : public ::testing::TestWithParam<std::tuple<std::string, int32_t>> {
 protected:
  PagedConsistency()
      : config_(testing::tiny_config(std::get<0>(GetParam()))),
        weights_(testing::random_weights(config_, 1234)),
        model_(config_, weights_of(weights_), backend_) {}
  int32_t block_size() const { return std::get<1>(GetParam()); }

  ModelConfig config_;
  WeightMap weights_;
  CpuBackend backend_;
  LlamaModel model_;
};

// The paged schedule against a dense, unpaged double-precision forward pass: catches errors
// that every schedule would share (e.g. reading a wrong but consistently chosen slot).
TEST_P(PagedConsistency, ChunkedPrefillMatchesDenseReference) {
  const int64_t vocab = config_.vocab_size;
  const auto tokens = random_tokens(37, vocab, 8);
  const auto paged = run_chunked(model_, tokens, 7, block_size(), 21);
  const testing::Mat dense = testing::dense_forward(config_, weights_, tokens);
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    const std::vector<float> ref(dense[pos].begin(), dense[pos].end());
    EXPECT_LE(rel_diff(paged.data() + pos * vocab, ref.data(), vocab), 1e-4) << "position " << pos;
  }
}

TEST_P(PagedConsistency, ChunkedPrefillMatchesPrefillAtOnce) {
  const int64_t vocab = config_.vocab_size;
  const auto tokens = random_tokens(70, vocab, 5);
  const auto full = run_chunked(model_, tokens, 1000, block_size(), 11);
  ASSERT_EQ(full.size(), tokens.size() * static_cast<size_t>(vocab));
  for (int32_t chunk : {1, 7, 64}) {
    const auto chunked = run_chunked(model_, tokens, chunk, block_size(), 100 + chunk);
    ASSERT_EQ(chunked.size(), full.size());
    for (size_t pos = 0; pos < tokens.size(); ++pos) {
      EXPECT_LE(rel_diff(chunked.data() + pos * vocab, full.data() + pos * vocab, vocab),
                kScheduleRelTol)
          << "chunk " << chunk << " position " << pos;
    }
  }
}

TEST_P(PagedConsistency, DecodeMatchesPrefillOfTheWholeSequence) {
  const int64_t vocab = config_.vocab_size;
  const int32_t bs = block_size();
  KvCache cache = model_.make_kv_cache(64 / bs + 8, bs);
  RandomBlocks pool(64 / bs + 8, 77);
  SeqState seq{random_tokens(20, vocab, 6), {}, 0};
  Tensor last = model_.forward(make_step({{&seq, 20}}, bs, pool), cache);
  std::vector<float> decode_logits;
  for (int step = 0; step < 30; ++step) {
    const float* row = last.data<float>() + (last.size(0) - 1) * vocab;
    decode_logits.insert(decode_logits.end(), row, row + vocab);
    seq.tokens.push_back(argmax(row, vocab));
    last = model_.forward(make_step({{&seq, 1}}, bs, pool), cache);
  }
  const auto full = run_chunked(model_, seq.tokens, 1000, bs, 9);
  for (int step = 0; step < 30; ++step) {
    const float* prefill_row = full.data() + (19 + step) * vocab;
    EXPECT_LE(rel_diff(decode_logits.data() + step * vocab, prefill_row, vocab), kScheduleRelTol)
        << "decode step " << step;
    EXPECT_EQ(argmax(prefill_row, vocab), seq.tokens[static_cast<size_t>(20 + step)])
        << "greedy token at step " << step;
  }
}

TEST_P(PagedConsistency, BatchedSequencesMatchEachAlone) {
  const int64_t vocab = config_.vocab_size;
  const int32_t bs = block_size();
  const std::vector<int64_t> lengths = {1, 13, 40, 70, 3, 29, 2};
  const std::vector<int32_t> chunks = {1, 7, 64, 5, 100, 1, 2};
  std::vector<SeqState> seqs;
  std::vector<std::vector<float>> alone, batched(lengths.size());
  int64_t total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    seqs.push_back({random_tokens(lengths[i], vocab, 40 + static_cast<uint32_t>(i)), {}, 0});
    alone.push_back(
        run_chunked(model_, seqs.back().tokens, 1000, bs, 50 + static_cast<uint32_t>(i)));
    total += lengths[i];
  }
  const int64_t num_blocks = 2 * (total / bs + static_cast<int64_t>(lengths.size()) + 1);
  KvCache cache = model_.make_kv_cache(num_blocks, bs);
  RandomBlocks pool(num_blocks, 99);
  // Every step, each unfinished sequence computes its next chunk: a mix of prefill, chunked
  // prefill and decode in one ragged batch.
  for (;;) {
    std::vector<std::pair<SeqState*, int32_t>> work;
    std::vector<size_t> who;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int32_t left = static_cast<int32_t>(seqs[i].tokens.size()) - seqs[i].computed;
      if (left > 0) {
        work.emplace_back(&seqs[i], std::min(left, chunks[i]));
        who.push_back(i);
      }
    }
    if (work.empty()) break;
    const Tensor out = model_.forward(make_step(work, bs, pool), cache);
    int64_t row = 0;
    for (size_t w = 0; w < work.size(); ++w) {
      const float* begin = out.data<float>() + row * vocab;
      batched[who[w]].insert(batched[who[w]].end(), begin, begin + work[w].second * vocab);
      row += work[w].second;
    }
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    ASSERT_EQ(batched[i].size(), alone[i].size());
    for (int64_t pos = 0; pos < lengths[i]; ++pos) {
      EXPECT_LE(rel_diff(batched[i].data() + pos * vocab, alone[i].data() + pos * vocab, vocab),
                kScheduleRelTol)
          << "sequence " << i << " position " << pos;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ArchAndPageSize, PagedConsistency,
                         ::testing::Combine(::testing::Values("llama", "mistral", "qwen2", "mpt"),
                                            ::testing::Values(1, 3, 16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_page" +
                                  std::to_string(std::get<1>(info.param));
                         });

// The same properties on the real SmolLM2-135M weights (dequantised from the GGUF).
TEST(PagedConsistencySmolLM2, ChunkedPrefillAndDecodeMatchPrefillAtOnce) {
  INFLIGHT_REQUIRE_MODEL(path);
  const auto files = ModelFiles::open(path);
  CpuBackend backend;
  const std::unique_ptr<Model> model_owner = load_model(*files, backend);
  Model& model = *model_owner;
  const int64_t vocab = model.config().vocab_size;
  const auto tokens = random_tokens(40, vocab, 3);
  const auto full = run_chunked(model, tokens, 1000, 16, 1);
  const auto chunked = run_chunked(model, tokens, 7, 3, 2);
  const auto decoded = run_chunked(model, tokens, 1, 16, 4);
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    EXPECT_LE(rel_diff(chunked.data() + pos * vocab, full.data() + pos * vocab, vocab),
              kScheduleRelTol)
        << "chunked, position " << pos;
    EXPECT_LE(rel_diff(decoded.data() + pos * vocab, full.data() + pos * vocab, vocab),
              kScheduleRelTol)
        << "token by token, position " << pos;
  }
}

}  // namespace
}  // namespace inflight
