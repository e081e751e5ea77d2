// paged_attention: scaled dot-product attention of a ragged batch over the paged KV cache.
//
// Sequence s owns tokens [query_start[s], query_start[s+1]) of the batch: its n_s new tokens,
// which are the last n_s of its context_lens[s] tokens (their K/V already written to the cache
// by rope_kv_write). Token t of sequence s sits at context position
//   p = context_lens[s] - (query_start[s+1] - t)
// and attends to the positions [lo, p] of its own sequence (causal within the new tokens, full
// attention to the cached prefix), with lo = max(0, p - sliding_window + 1) when a window is
// set and 0 otherwise. Query head h reads kv head h / (H / KH) (GQA).
//
//   q   [T, H, D]   out [T, H, D]   scores scaled by `scale` (1 / sqrt(D) for Llama)
//
// ALiBi (MPT): with slopes [H], the score of query head h at position p for the key at
// position j is q.k * scale + slopes[h] * (j - p). Positions are absolute context positions, so
// a prefix-cache hit or a chunk of a prompt gives the scores the whole prompt would.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/paged_kv.h"
#include "runtime/kv_cache_layer.h"

namespace inflight {

struct PagedAttentionParams {
  const void* q = nullptr;
  void* out = nullptr;  // must not alias q
  PagedKv kv;
  const int32_t* query_start = nullptr;   // [num_seqs + 1], query_start[0] = 0
  const int32_t* context_lens = nullptr;  // [num_seqs]
  int64_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t num_heads = 0;
  int32_t max_context_len = 0;  // host-side bound on context_lens (sizes scratch / launches)
  int32_t sliding_window = 0;   // 0: unlimited
  float scale = 1.0f;
  const float* alibi_slopes = nullptr;  // [H] f32 (ALiBi), or null: no position bias
  DType dtype = DType::kF32;            // of q and out
};

// Validates q [T, H, D], out like q, the layer's cache [NB, BS, KH, D] of q's dtype or e4m3
// (runtime/kv_cache_layer.h), block_tables [S, max_blocks] i32, query_start [S + 1] and
// context_lens [S] i32, H % KH == 0, max_context_len <= max_blocks * BS, sliding_window >= 0,
// alibi_slopes (optional) [H] f32 on q's device.
// NOTE: the device-side index arrays are not read here; ForwardBatch::validate checks them on
// the host before upload.
PagedAttentionParams make_paged_attention_params(
    const Tensor& q, const KvCacheLayer& kv, const Tensor& block_tables, const Tensor& query_start,
    const Tensor& context_lens, int32_t max_context_len, int32_t sliding_window, float scale,
    const Tensor* alibi_slopes, const Tensor& out);

// f32 q (an f32 or e4m3 cache, e4m3 rows dequantized as read); two-pass softmax per (token,
// head), multithreaded over (token, kv head).
void paged_attention_cpu(const PagedAttentionParams& p);

}  // namespace inflight
