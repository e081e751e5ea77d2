// The K/V stage of an attention tile (attention_tile.cuh): each stage's K and V rows gathered
// through the block table with 16-byte cp.async copies into 128-byte-swizzled shared memory (the
// layout ldmatrix and wgmma read), or, for an e4m3 cache, its rows and their scales staged, then
// widened into the bf16 tile (value * scale: prefill tiles) or read by the MMAs as they are
// (decode tiles, attention_e4m3_mma.cuh).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "ops/attention_tile_params.cuh"

namespace inflight::attention {

// Byte offset of 16-byte chunk c of row r in a [kTileRows, D] bf16 tile stored as 64-element
// (128-byte) slabs, slab after slab: slab c / 8, row r at 128 r, chunk c % 8 XOR-swizzled by
// r % 8. The 8 row addresses of one ldmatrix matrix (one chunk, 8 consecutive rows) fall in 8
// different bank groups, and the pattern is wgmma's 128-byte swizzle.
template <int kTileRows>
__device__ __forceinline__ uint32_t tile_offset(int r, int c) {
  return static_cast<uint32_t>((c >> 3) * (kTileRows * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// Byte offset of 16-byte chunk c of row r in an e4m3 stage of D-byte rows: chunk c lands at
// c ^ swizzle(r), so that 8 consecutive rows of one chunk (an ldmatrix matrix) fall in 8
// different bank groups: r % 8 for 128-byte rows, (r / 2) % 4 for 64-byte rows (two rows per
// 128 bytes).
template <int D>
__device__ __forceinline__ uint32_t e4m3_offset(int r, int c) {
  static_assert(D == 64 || D == 128, "e4m3 stages hold rows of 64 or 128 bytes");
  const int swizzle = D == 128 ? r & 7 : (r >> 1) & 3;
  return static_cast<uint32_t>(r * D + ((c ^ swizzle) << 4));
}

// K/V stage copies: 8 neighbouring threads share a key row and read 128 contiguous bytes per
// copy (one whole L2 line: a warp's copy instruction touches 4 lines, fully), chunks
// c = t % 8 + 8 i; thread t takes rows t / 8 + kRowsPerPass p. One block-table read per row
// serves the thread's kChunks / 8 copies of it (half the rows, and reads, per thread of a
// 16-threads-per-row split). Splits into 32-byte pieces of more rows (one row per thread) cost
// 20% of decode bandwidth at batch 256: 4x the L2 requests for the same bytes.
template <class Shape>
struct KvCopy {
  static constexpr int kPerRow = 8;                               // threads per key row
  static constexpr int kRowsPerPass = Shape::kThreads / kPerRow;  // a multiple of 8
  static_assert(Shape::kKeys % kRowsPerPass == 0 && kRowsPerPass % 8 == 0, "whole passes");
};

// This thread's view of the K/V rows of one (sequence, kv head), set up once per CTA: a key's
// row is k + table[key / page] * page_elems + (key % page) * slot_elems, and likewise in v;
// an e4m3 cache's row scale is k_scales[slot * KH] (slot = table[key / page] * page + key %
// page), likewise in v_scales.
template <class Elem>
struct KvGather {
  const Elem* k;  // cache base + kv head * D + this thread's first chunk
  const Elem* v;
  const float* k_scales;  // e4m3: scales + kv head
  const float* v_scales;
  int32_t num_kv_heads;
  const int32_t* table;  // the sequence's block table row
  uint32_t page_mul;
  int32_t page_shift, page_size;
  int32_t page_elems;  // block_size * KH * D
  int32_t slot_elems;  // KH * D
};

template <class Shape>
using KvElem = std::conditional_t<Shape::kFp8, uint8_t, bf16>;

template <class Shape>
__device__ __forceinline__ KvGather<KvElem<Shape>> kv_gather(const TileParams& tp, int32_t seq,
                                                             int32_t kh) {
  using Elem = KvElem<Shape>;
  const PagedKv& kv = tp.p.kv;
  const int32_t slot_elems = kv.num_kv_heads * kv.head_dim;
  // Per thread of a row: 8 elements per 16-byte chunk (bf16), or D / 8 bytes (e4m3).
  constexpr int kFirst = Shape::kFp8 ? Shape::kChunks : 8;  // kChunks = D / 8
  const int64_t first =
      static_cast<int64_t>(kh) * kv.head_dim + (threadIdx.x % KvCopy<Shape>::kPerRow) * kFirst;
  return {static_cast<const Elem*>(kv.k) + first,
          static_cast<const Elem*>(kv.v) + first,
          kv.k_scales + kh,
          kv.v_scales + kh,
          kv.num_kv_heads,
          kv.block_tables + static_cast<int64_t>(seq) * kv.max_blocks_per_seq,
          tp.page_mul,
          tp.page_shift,
          kv.block_size,
          kv.block_size * slot_elems,
          slot_elems};
}

// Stages keys [kb, kb + kKeys) into shared K/V at sk, sv (KvCopy's split): per thread one
// block-table read and a few integer ops (no division), then its copies. Keys past hi are
// zero-filled: their scores are masked, and zero V keeps 0 * V finite.
template <class Shape>
__device__ __forceinline__ void load_kv_stage(const KvGather<bf16>& gk, int32_t kb, int32_t hi,
                                              uint32_t sk, uint32_t sv) {
  using Copy = KvCopy<Shape>;
  const int c0 = threadIdx.x % Copy::kPerRow;
#pragma unroll
  for (int pass = 0; pass < Shape::kKeys / Copy::kRowsPerPass; ++pass) {
    const int r = threadIdx.x / Copy::kPerRow + pass * Copy::kRowsPerPass;
    const int32_t key = kb + r;
    const bool valid = key <= hi;
    int64_t off = 0;
    if (valid) {
      const int32_t page = static_cast<int32_t>(
          (__umulhi(static_cast<uint32_t>(key), gk.page_mul) + key) >> gk.page_shift);
      off = static_cast<int64_t>(__ldg(gk.table + page)) * gk.page_elems +
            (key - page * gk.page_size) * gk.slot_elems;
    }
#pragma unroll
    for (int i = 0; i < Shape::kChunks / Copy::kPerRow; ++i) {
      const uint32_t dst = tile_offset<Shape::kKeys>(r, c0 + Copy::kPerRow * i);
      cp_async_16(sk + dst, gk.k + off + Copy::kPerRow * 8 * i, valid);
      cp_async_16(sv + dst, gk.v + off + Copy::kPerRow * 8 * i, valid);
    }
  }
}

// The e4m3 form of load_kv_stage: keys [kb, kb + kKeys) as rows of D bytes at s8 (K, then V
// kFp8StageBytes later; D / 8 bytes per thread of a row, chunks placed by e4m3_offset) and their
// scales at s8 + 2 kFp8StageBytes (K, then V kKeys floats later). Keys past hi are zero-filled,
// scales too.
template <class Shape>
__device__ __forceinline__ void load_kv_stage_fp8(const KvGather<uint8_t>& gk, int32_t kb,
                                                  int32_t hi, uint32_t s8) {
  using Copy = KvCopy<Shape>;
  constexpr int D = Shape::kChunks * 8, kBytes = D / Copy::kPerRow;
  const int c0 = threadIdx.x % Copy::kPerRow;
  const uint32_t sv = s8 + Shape::kFp8StageBytes, sks = sv + Shape::kFp8StageBytes;
  const uint32_t svs = sks + Shape::kKeys * 4;
#pragma unroll
  for (int pass = 0; pass < Shape::kKeys / Copy::kRowsPerPass; ++pass) {
    const int r = threadIdx.x / Copy::kPerRow + pass * Copy::kRowsPerPass;
    const int32_t key = kb + r;
    const bool valid = key <= hi;
    int64_t slot = 0;
    if (valid) {
      const int32_t page = static_cast<int32_t>(
          (__umulhi(static_cast<uint32_t>(key), gk.page_mul) + key) >> gk.page_shift);
      slot =
          static_cast<int64_t>(__ldg(gk.table + page)) * gk.page_size + (key - page * gk.page_size);
    }
    const uint32_t dst = e4m3_offset<D>(r, c0 * kBytes / 16) + c0 * kBytes % 16;
    if constexpr (kBytes == 16) {
      cp_async_16(s8 + dst, gk.k + slot * gk.slot_elems, valid);
      cp_async_16(sv + dst, gk.v + slot * gk.slot_elems, valid);
    } else {
      cp_async_small<kBytes>(s8 + dst, gk.k + slot * gk.slot_elems, valid);
      cp_async_small<kBytes>(sv + dst, gk.v + slot * gk.slot_elems, valid);
    }
    if (c0 == 0) {
      cp_async_small<4>(sks + r * 4, gk.k_scales + slot * gk.num_kv_heads, valid);
      cp_async_small<4>(svs + r * 4, gk.v_scales + slot * gk.num_kv_heads, valid);
    }
  }
}

// Widens one e4m3 stage (load_kv_stage_fp8's layout at src) into the bf16 K and V tiles at
// dst_k, dst_v (tile_offset layout): element = bf16(e4m3_to_f32(byte) * row scale). 16 values
// per thread and step: one 16-byte read, two 16-byte writes.
template <class Shape>
__device__ __forceinline__ void widen_kv_stage(const unsigned char* src, unsigned char* dst_k,
                                               unsigned char* dst_v) {
  constexpr int D = Shape::kChunks * 8, kUnits = Shape::kKeys * (D / 16);
  const auto* scales = reinterpret_cast<const float*>(src + 2 * Shape::kFp8StageBytes);
#pragma unroll
  for (int kv = 0; kv < 2; ++kv) {
    const unsigned char* rows = src + kv * Shape::kFp8StageBytes;
    unsigned char* dst = kv == 0 ? dst_k : dst_v;
    for (int i = threadIdx.x; i < kUnits; i += Shape::kThreads) {
      const int r = i / (D / 16), u = i % (D / 16);
      const uint4 raw = *reinterpret_cast<const uint4*>(rows + e4m3_offset<D>(r, u));
      const float scale = scales[kv * Shape::kKeys + r];
      const auto* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&raw);
      uint32_t w[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pairs[e], __NV_E4M3)));
        w[e] = pack_bf16x2(f.x * scale, f.y * scale);
      }
      *reinterpret_cast<uint4*>(dst + tile_offset<Shape::kKeys>(r, 2 * u)) =
          make_uint4(w[0], w[1], w[2], w[3]);
      *reinterpret_cast<uint4*>(dst + tile_offset<Shape::kKeys>(r, 2 * u + 1)) =
          make_uint4(w[4], w[5], w[6], w[7]);
    }
  }
}

}  // namespace inflight::attention
