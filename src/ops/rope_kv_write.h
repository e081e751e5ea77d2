// rope_kv_write: rotary position embedding (NeoX / rotate-half layout, as Hugging Face Llama,
// Mistral and Qwen2 apply it) fused with writing the step's keys and values into the paged
// KV cache.
//
//   qkv     [T, (H + 2*KH) * D]  output of the fused QKV projection: q heads, k heads, v heads
//   q_out   [T, H, D]            rotated queries
//   kv      one layer's cache (runtime/kv_cache_layer.h): rotated k and plain v land at slot
//           slot_mapping[t]; a negative slot skips the write (padding tokens). An e4m3 cache
//           gets each (token, kv head) vector quantized with its own scale (kv_fp8_scale of
//           its largest magnitude, computed from the f32 values before any rounding).
//
// With half = D / 2 and angle = positions[t] * inv_freq[i] (f32 product, as the reference
// computes it), for i < half:
//   out[i]        = x[i] * cos(angle) - x[i + half] * sin(angle)
//   out[i + half] = x[i + half] * cos(angle) + x[i] * sin(angle)
// inv_freq [half] (always f32) carries theta and any frequency scaling (linear, llama3); the
// model computes it on the host (rope_inv_freq() in model/llama.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/paged_kv.h"
#include "runtime/kv_cache_layer.h"

namespace inflight {

struct RopeKvWriteParams {
  const void* qkv = nullptr;
  void* q_out = nullptr;
  PagedKv kv;  // k, v, num_blocks, block_size, num_kv_heads, head_dim (block_tables unused)
  const int32_t* positions = nullptr;     // [T]
  const int64_t* slot_mapping = nullptr;  // [T]
  const float* inv_freq = nullptr;        // [D / 2]
  int64_t num_tokens = 0;
  int32_t num_heads = 0;
  DType dtype = DType::kF32;
};

// Validates the shapes above; D must be even; qkv and q_out share one float dtype, the cache
// holds it or e4m3, all on one device; positions i32, slot_mapping i64, inv_freq f32 [D / 2].
// NOTE: positions and slots live on the device and are not range-checked here; the model
// validates the ForwardBatch on the host before upload.
RopeKvWriteParams make_rope_kv_write_params(const Tensor& qkv, const Tensor& positions,
                                            const Tensor& slot_mapping, const Tensor& inv_freq,
                                            const Tensor& q_out, const KvCacheLayer& kv);

// f32 q and k/v (an f32 or e4m3 cache).
void rope_kv_write_cpu(const RopeKvWriteParams& p);

}  // namespace inflight
