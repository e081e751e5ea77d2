// Tensor parallelism (Megatron-LM's layout): what rank r of T holds of a model.
//
//   q/k/v, gate/up      column-parallel: the rows of rank r's heads / MLP columns; no collective
//   o, down, experts'   row-parallel: the matching input columns; the ranks' partial outputs are
//   down                summed by an all-reduce (the bias, if any, added on rank 0 only)
//   attention heads     H / T query heads per rank; KH / T KV heads when T divides KH, else each
//                       rank holds the one KV head its query heads read (replicated KH < T)
//   experts             every expert on every rank, each expert's MLP width split like the dense
//                       MLP's (the router is replicated, so every rank routes alike)
//   embedding, LM head  vocabulary-parallel when T divides the vocabulary: rank r holds rows
//                       [r V / T, (r + 1) V / T); its embedding lookup gives zeros for other ids
//                       and an all-reduce sums the shards; its logits are those columns (the
//                       runner gathers candidates, runtime/device_runner.h). Otherwise both are
//                       replicated.
//   norms, RoPE         replicated; ALiBi slopes: those of the rank's global heads (model/alibi.h)
#pragma once

#include <cstdint>

#include "formats/model_config.h"

namespace inflight {

// [begin, begin + size) of a dimension.
struct SliceRange {
  int64_t begin = 0;
  int64_t size = 0;
  int64_t end() const { return begin + size; }
};

struct TensorParallelShard {
  int rank = 0;
  int size = 1;
  SliceRange heads;         // query heads
  SliceRange kv_heads;      // KV heads
  SliceRange intermediate;  // dense MLP columns
  SliceRange expert_intermediate;
  SliceRange vocab;  // embedding rows and logits columns (the whole vocabulary: replicated)

  bool sharded() const { return size > 1; }
  bool vocab_parallel() const { return sharded() && vocab.size * size == vocab_size_; }

  // Rank `rank` of `size` over `config`. Throws Error(kUnsupported) naming the dimension that
  // `size` does not divide (heads, KV heads, MLP width, expert width).
  static TensorParallelShard of(const ModelConfig& config, int rank, int size);

  // `config` as this rank computes it: num_heads, num_kv_heads, intermediate_size,
  // moe_intermediate_size and vocab_size of its shard.
  ModelConfig apply(const ModelConfig& config) const;

 private:
  int64_t vocab_size_ = 0;
};

}  // namespace inflight
