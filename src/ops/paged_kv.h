// PagedKv: one layer's paged KV cache and the block tables of a batch, as a plain view that
// the CPU kernels and the CUDA kernels share (passed by value into a kernel).
//
//   k, v          [num_blocks, block_size, num_kv_heads, head_dim]   (NHD), element type chosen
//                 by the backend (f32 on CPU); a "slot" is block * block_size + offset.
//   block_tables  [num_seqs, max_blocks_per_seq] block ids; position p of sequence s lives in
//                 block block_tables[s, p / block_size] at offset p % block_size. Entries past a
//                 sequence's last block are never read (the engine pads them with -1).
#pragma once

#include "core/hash.h"  // INFLIGHT_HOST_DEVICE

#include <cstdint>


namespace inflight {

struct PagedKv {
  void* k = nullptr;
  void* v = nullptr;
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
};

}  // namespace inflight
