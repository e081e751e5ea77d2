// PagedKv: one layer's paged KV cache and the block tables of a batch, as a plain view that
// the CPU kernels and the CUDA kernels share (passed by value into a kernel).
//
//   k, v          [num_blocks, block_size, num_kv_heads, head_dim]   (NHD) of `dtype`: the
//                 backend's compute dtype (f32 on CPU), or e4m3 (an FP8 cache) where element i
//                 of (slot, kv head) stands for e4m3_to_f32(k[...]) * k_scales[scale_offset];
//                 a "slot" is block * block_size + offset.
//   k_scales, v_scales  [num_blocks, block_size, num_kv_heads] f32, e4m3 caches only: one scale
//                 per token and kv head, written with the values (kv_fp8_scale below).
//   block_tables  [num_seqs, max_blocks_per_seq] block ids; position p of sequence s lives in
//                 block block_tables[s, p / block_size] at offset p % block_size. Entries past a
//                 sequence's last block are never read (the engine pads them with -1).
#pragma once

#include "core/dtype.h"
#include "core/hash.h"  // INFLIGHT_HOST_DEVICE

#include <cstdint>

namespace inflight {

struct PagedKv {
  void* k = nullptr;
  void* v = nullptr;
  float* k_scales = nullptr;  // e4m3 caches only
  float* v_scales = nullptr;
  DType dtype = DType::kF32;              // of k and v
  const int32_t* block_tables = nullptr;  // may be null for ops that address slots directly
  int64_t num_blocks = 0;
  int32_t max_blocks_per_seq = 0;
  int32_t block_size = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;

  // The slot holding position `pos` of sequence `seq`.
  INFLIGHT_HOST_DEVICE int64_t slot(int32_t seq, int32_t pos) const {
    const int32_t block =
        block_tables[static_cast<int64_t>(seq) * max_blocks_per_seq + pos / block_size];
    return static_cast<int64_t>(block) * block_size + pos % block_size;
  }

  // Element offset of (slot, kv head) in k or v; head_dim contiguous elements follow.
  INFLIGHT_HOST_DEVICE int64_t offset(int64_t slot, int32_t kv_head) const {
    return (slot * num_kv_heads + kv_head) * head_dim;
  }

  // Index of (slot, kv head) in k_scales or v_scales.
  INFLIGHT_HOST_DEVICE int64_t scale_offset(int64_t slot, int32_t kv_head) const {
    return slot * num_kv_heads + kv_head;
  }

  INFLIGHT_HOST_DEVICE bool fp8() const { return dtype == DType::kF8E4M3; }
};

// The scale of one (token, kv head) vector of an e4m3 cache with largest magnitude amax: amax
// maps to 448, e4m3's largest value (1 for an all-zero vector). Its values are
// e4m3_satfinite(x_i * (1 / scale)), as quantize_fp8 rounds activations. A scale per token and
// head follows each vector's own range (keys' outlier channels, values' growth along the
// sequence), where one static scale per tensor clips or wastes range.
INFLIGHT_HOST_DEVICE float kv_fp8_scale(float amax) {
  return amax > 0.0f ? amax / 448.0f : 1.0f;
}

}  // namespace inflight
