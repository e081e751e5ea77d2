// DecodeGraphs: decode steps replayed as backend graphs (CUDA graphs), one graph per bucket.
//
// A decode-only step (every sequence computes exactly one token and samples it) of S sequences
// runs padded to a bucket (B, W): B >= S sequences from a fixed list (1, 2, 4, 8, then steps of
// 8, as vLLM captures), block tables W >= max_blocks_per_seq columns wide (a power of two). The
// padding sequences compute one token each at position 0 of block 0 and write nothing (slot -1
// skips the KV write, ops/rope_kv_write.h); their logits rows are never read. A bucket fixes
// every launch size and, with the same inputs buffer, every address the step's ops use, so the
// ops recorded once replay for any batch of the bucket.
//
// The captured ops bake in: the workspace and KV cache tensors (fixed after reserve), the
// weights, the packed step inputs (same layout for every batch of the bucket, at the address
// recorded with the graph: a graph whose inputs moved is captured again), and the attention's
// max_context_len, set to W * block_size, a bound that holds for every batch of the bucket.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "runtime/backend.h"
#include "runtime/forward_batch.h"

namespace inflight {

enum class GraphMode {
  kOff,      // decode steps run as they come, unpadded
  kPadOnly,  // padded to buckets but run op by op (the reference for kCapture in tests)
  kCapture,  // padded, captured on a bucket's first use, replayed afterwards
};

class DecodeGraphs {
 public:
  struct Bucket {
    int32_t batch = 0;        // B sequences (and tokens, and logits rows)
    int32_t table_width = 0;  // W block-table columns
    auto operator<=>(const Bucket&) const = default;
  };

  DecodeGraphs(GraphMode mode, int32_t max_batch);

  GraphMode mode() const { return mode_; }
  int32_t max_batch() const { return max_batch_; }

  // The bucket of a decode-only batch, or nullopt (mode kOff, a prefill token, a sequence that
  // does not sample, or more than max_batch sequences).
  std::optional<Bucket> bucket_for(const ForwardBatch& batch) const;

  // `batch` padded to `bucket` (see above), into `out` (its storage is reused).
  static void pad(const ForwardBatch& batch, const Bucket& bucket, ForwardBatch& out);

  // Batch sizes B served up to max_batch: 1, 2, 4, 8, 16, 24, ... (the last >= max_batch).
  static int32_t round_batch(int32_t num_seqs);

  // A recorded step: the graph and the tensor its replay leaves the logits in.
  struct Recorded {
    std::unique_ptr<BackendGraph> graph;
    Tensor logits;  // [bucket.batch, vocab] f32
  };
  // What was recorded for `bucket` with its inputs at `inputs`, or null.
  const Recorded* find(const Bucket& bucket, const void* inputs) const;
  void store(const Bucket& bucket, const void* inputs, Recorded recorded);
  // Drops every graph (the workspace moved).
  void clear() { graphs_.clear(); }
  size_t size() const { return graphs_.size(); }

 private:
  struct Entry {
    const void* inputs = nullptr;
    Recorded recorded;
  };
  GraphMode mode_;
  int32_t max_batch_;
  std::map<Bucket, Entry> graphs_;
};

}  // namespace inflight
