#include <algorithm>
#include <cmath>
#include <vector>

#include "core/fp8.h"
#include "core/thread_pool.h"
#include "ops/cpu_dispatch.h"
#include "ops/cpu_dot.h"
#include "ops/paged_attention.h"

namespace inflight {

namespace {

// The sequence that owns batch token t: the s with query_start[s] <= t < query_start[s + 1].
inline int32_t owner_seq(const int32_t* query_start, int32_t num_seqs, int64_t t) {
  const int32_t* it = std::upper_bound(query_start, query_start + num_seqs + 1, t);
  return static_cast<int32_t>(it - query_start) - 1;
}

// Calls fn(j, slot, count) for the runs of consecutive positions in [lo, pos] of sequence `seq`
// that share a block: positions lo + j .. lo + j + count - 1 sit in slots slot .. slot + count
// - 1. Saves a division per key and lets the inner loops walk memory linearly.
template <typename Fn>
INFLIGHT_CPU_INLINE void for_each_run(const PagedKv& kv, int32_t seq, int32_t lo, int32_t pos,
                                      Fn&& fn) {
  for (int32_t p = lo; p <= pos;) {
    const int32_t offset = p % kv.block_size;
    const int32_t count = std::min(kv.block_size - offset, pos - p + 1);
    fn(p - lo, kv.slot(seq, p), count);
    p += count;
  }
}

// Row (slot, kv_head) of k or v (with its scales) as f32: the cache's own memory, or for an
// e4m3 cache `buf` [head_dim] holding the dequantized values.
INFLIGHT_CPU_INLINE const float* kv_row(const PagedKv& kv, const void* cache, const float* scales,
                                        int64_t slot, int32_t kv_head, float* buf) {
  const int64_t off = kv.offset(slot, kv_head);
  if (!kv.fp8()) return static_cast<const float*>(cache) + off;
  const float* table = e4m3_table();
  const uint8_t* values = static_cast<const uint8_t*>(cache) + off;
  const float scale = scales[kv.scale_offset(slot, kv_head)];
  for (int32_t d = 0; d < kv.head_dim; ++d) buf[d] = table[values[d]] * scale;
  return buf;
}

// The `group` query heads of token t that share kv head `kv_head`, written to out.
// probs: scratch of at least group * (context length) floats; row: head_dim floats.
INFLIGHT_CPU_CLONES
void attend(const PagedAttentionParams& p, int64_t t, int32_t kv_head, std::vector<float>& probs,
            float* row) {
  const int32_t num_heads = p.num_heads, head_dim = p.kv.head_dim;
  const int32_t group = num_heads / p.kv.num_kv_heads;
  const int32_t s = owner_seq(p.query_start, p.num_seqs, t);
  const int32_t pos = p.context_lens[s] - static_cast<int32_t>(p.query_start[s + 1] - t);
  const int32_t lo = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
  const int32_t n = pos - lo + 1;
  if (probs.size() < static_cast<size_t>(group) * n) {
    probs.resize(static_cast<size_t>(group) * n);  // a max_context_len hint too small
  }
  const int32_t h0 = kv_head * group;
  const float* q = static_cast<const float*>(p.q) + (t * num_heads + h0) * head_dim;
  // probs[g * n + j]: the score, then the probability, of group head g for position lo + j.
  for_each_run(p.kv, s, lo, pos, [&](int32_t j0, int64_t slot, int32_t count) {
    for (int32_t c = 0; c < count; ++c) {
      const float* k = kv_row(p.kv, p.kv.k, p.kv.k_scales, slot + c, kv_head, row);
      for (int32_t g = 0; g < group; ++g) {
        probs[static_cast<size_t>(g) * n + j0 + c] = dot(q + g * head_dim, k, head_dim) * p.scale;
      }
    }
  });
  if (p.alibi_slopes != nullptr) {  // + slope * (key - query), key = lo + j
    for (int32_t g = 0; g < group; ++g) {
      const float slope = p.alibi_slopes[h0 + g];
      float* row = probs.data() + static_cast<size_t>(g) * n;
      for (int32_t j = 0; j < n; ++j) row[j] += slope * static_cast<float>(lo + j - pos);
    }
  }
  for (int32_t g = 0; g < group; ++g) {
    float* row = probs.data() + static_cast<size_t>(g) * n;
    const float max_score = *std::max_element(row, row + n);
    double sum = 0.0;
    for (int32_t j = 0; j < n; ++j) {
      row[j] = std::exp(row[j] - max_score);
      sum += row[j];
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int32_t j = 0; j < n; ++j) row[j] *= inv_sum;
  }
  float* out = static_cast<float*>(p.out) + (t * num_heads + h0) * head_dim;
  std::fill(out, out + static_cast<int64_t>(group) * head_dim, 0.0f);
  for_each_run(p.kv, s, lo, pos, [&](int32_t j0, int64_t slot, int32_t count) {
    for (int32_t c = 0; c < count; ++c) {
      const float* v = kv_row(p.kv, p.kv.v, p.kv.v_scales, slot + c, kv_head, row);
      for (int32_t g = 0; g < group; ++g) {
        const float w = probs[static_cast<size_t>(g) * n + j0 + c];
        float* o = out + g * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) o[d] += w * v[d];
      }
    }
  });
}

}  // namespace

void paged_attention_cpu(const PagedAttentionParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "paged_attention_cpu: f32 q only, got {}",
                 dtype_name(p.dtype));
  const int32_t num_kv_heads = p.kv.num_kv_heads;
  const int32_t group = p.num_heads / num_kv_heads;
  ThreadPool::global().parallel_for(p.num_tokens * num_kv_heads, [&](int64_t begin, int64_t end) {
    std::vector<float> probs(static_cast<size_t>(group) * std::max(1, p.max_context_len));
    std::vector<float> row(static_cast<size_t>(p.kv.head_dim));
    for (int64_t item = begin; item < end; ++item) {
      attend(p, item / num_kv_heads, static_cast<int32_t>(item % num_kv_heads), probs, row.data());
    }
  });
}

}  // namespace inflight
