#include "runtime/decode_graphs.h"

#include <algorithm>
#include <bit>

#include "core/check.h"

namespace inflight {

namespace {

constexpr int32_t kMinTableWidth = 4;

}  // namespace

DecodeGraphs::DecodeGraphs(GraphMode mode, int32_t max_batch)
    : mode_(mode), max_batch_(round_batch(std::max(1, max_batch))) {}

int32_t DecodeGraphs::round_batch(int32_t num_seqs) {
  if (num_seqs <= 1) return 1;
  if (num_seqs <= 2) return 2;
  if (num_seqs <= 4) return 4;
  return (num_seqs + 7) / 8 * 8;
}

std::optional<DecodeGraphs::Bucket> DecodeGraphs::bucket_for(const ForwardBatch& batch) const {
  if (mode_ == GraphMode::kOff) return std::nullopt;
  const int32_t s = batch.num_seqs();
  if (s == 0 || s > max_batch_ || batch.num_tokens() != s ||
      static_cast<int32_t>(batch.logits_indices.size()) != s) {
    return std::nullopt;
  }
  for (int32_t i = 0; i < s; ++i) {
    if (batch.logits_indices[static_cast<size_t>(i)] != i) return std::nullopt;
  }
  Bucket b;
  b.batch = round_batch(s);
  b.table_width = static_cast<int32_t>(
      std::bit_ceil(static_cast<uint32_t>(std::max(kMinTableWidth, batch.max_blocks_per_seq))));
  return b;
}

void DecodeGraphs::pad(const ForwardBatch& batch, const Bucket& bucket, ForwardBatch& out) {
  const int32_t s = batch.num_seqs(), b = bucket.batch, w = bucket.table_width;
  INFLIGHT_CHECK(s <= b && batch.max_blocks_per_seq <= w && batch.num_tokens() == s,
                 "decode graphs: a batch of {} sequences x {} blocks does not fit bucket {} x {}",
                 s, batch.max_blocks_per_seq, b, w);
  const auto pad_to = [b](auto& v, const auto& src, auto fill) {
    v.assign(src.begin(), src.end());
    v.resize(static_cast<size_t>(b), fill);
  };
  pad_to(out.token_ids, batch.token_ids, int32_t{0});
  pad_to(out.positions, batch.positions, int32_t{0});
  pad_to(out.slot_mapping, batch.slot_mapping, int64_t{-1});  // padding writes no KV
  pad_to(out.context_lens, batch.context_lens, int32_t{1});
  out.query_start.resize(static_cast<size_t>(b) + 1);
  out.logits_indices.resize(static_cast<size_t>(b));
  for (int32_t i = 0; i <= b; ++i) out.query_start[static_cast<size_t>(i)] = i;
  for (int32_t i = 0; i < b; ++i) out.logits_indices[static_cast<size_t>(i)] = i;
  out.max_blocks_per_seq = w;
  out.block_tables.assign(static_cast<size_t>(b) * static_cast<size_t>(w), -1);
  for (int32_t i = 0; i < s; ++i) {
    std::copy_n(batch.block_tables.begin() + static_cast<ptrdiff_t>(i) * batch.max_blocks_per_seq,
                batch.max_blocks_per_seq, out.block_tables.begin() + static_cast<ptrdiff_t>(i) * w);
  }
  // Padding sequences read position 0 of block 0: a valid address, whatever it holds.
  for (int32_t i = s; i < b; ++i) out.block_tables[static_cast<size_t>(i) * w] = 0;
}

const DecodeGraphs::Recorded* DecodeGraphs::find(const Bucket& bucket, const void* inputs) const {
  const auto it = graphs_.find(bucket);
  if (it == graphs_.end() || it->second.inputs != inputs) return nullptr;
  return &it->second.recorded;
}

void DecodeGraphs::store(const Bucket& bucket, const void* inputs, Recorded recorded) {
  graphs_[bucket] = Entry{inputs, std::move(recorded)};
}

}  // namespace inflight
