// The plan of the tiled paged attention (attention_tile.cuh): the op's params with what the
// host worked out for the launch (TileParams), which rows and keys a tile covers, and the tile
// shapes (TileShape: warps, stages, shared-memory layout) its kernels are instantiated with.
#pragma once

#include <cstdint>

#include "ops/attention_mma.cuh"
#include "ops/cuda_common.cuh"
#include "ops/paged_attention.h"

namespace inflight::attention {

using cuda::bf16;

constexpr int kDecodeRows = 16;   // rows of a decode tile: n * g <= 16 makes a decode sequence
constexpr int kMaxParts = 256;    // split-KV parts per decode tile, at most
constexpr int kMinPartLen = 128;  // keys per part, at least (a part costs a partial write)
constexpr float kLog2e = 1.4426950408889634f;

// The op's params plus the launch plan made on the host.
struct TileParams {
  PagedAttentionParams p;
  int32_t group = 1;        // g = H / KH
  float scale_log2 = 1.0f;  // p.scale * log2(e): scores live in the log2 domain
  // Split-KV of decode tiles: a tile's key range of len keys is cut into parts of
  // part_length(len) keys, at most max_parts of them. max_parts == 1: no split, no workspace.
  int32_t part_len = 1;
  int32_t max_parts = 1;         // <= kMaxParts
  float* partial_o = nullptr;    // [S, KH, max_parts, 16, D] unnormalised outputs
  float2* partial_ml = nullptr;  // [S, KH, max_parts, 16] (running max, sum), log2 domain
  int32_t* counters = nullptr;   // [S, KH] parts finished; 0 between launches
  // Page of a key without a division: key / block_size = (umulhi(key, page_mul) + key) >>
  // page_shift for 0 <= key < 2^31 (page_divider on the host).
  uint32_t page_mul = 1;
  int32_t page_shift = 0;
};

// page_mul, page_shift for block_size d >= 1 (the round-up method of Granlund and Montgomery:
// l = ceil(log2 d), m = floor(2^32 (2^l - d) / d) + 1; t + key cannot overflow for key < 2^31).
inline void page_divider(TileParams& tp, int32_t d) {
  int32_t l = 0;
  while ((int64_t{1} << l) < d) ++l;
  tp.page_shift = l;
  tp.page_mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << l) - d)) / d + 1);
}

__device__ __forceinline__ bool is_decode_seq(int32_t n, int32_t g) {
  return n * g <= kDecodeRows;
}

struct KeyRange {
  int32_t lo, hi;  // inclusive
};

// The keys that tokens [first, last] of a sequence (context ctx, n new tokens) may read.
__device__ __forceinline__ KeyRange token_keys(int32_t window, int32_t ctx, int32_t n,
                                               int32_t first, int32_t last) {
  const int32_t p_first = ctx - n + first;
  return {window > 0 ? max(0, p_first - window + 1) : 0, ctx - n + last};
}

// Keys per split-KV part for a range of len keys: never more than max_parts parts, even when
// the host's max_context_len hint undercounts.
__device__ __forceinline__ int32_t part_length(const TileParams& tp, int32_t len) {
  return max(tp.part_len, (len + tp.max_parts - 1) / tp.max_parts);
}

template <int D, int kWarpsM, int kWarpsN, int kStages_, bool kFp8_ = false>
struct TileShape {
  static_assert(D == 64 || D == 128, "tiles are built for head_dim 64 and 128");
  static_assert(kWarpsM == 1 || kWarpsN == 1, "warps split either rows or keys");
  static constexpr bool kDecode = kWarpsM == 1;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kRows = 16 * kWarpsM;
  static constexpr int kWarpKeys = kDecode ? 16 : 64;  // keys of a stage per warp
  static constexpr int kKeys = kWarpKeys * kWarpsN;    // keys per stage
  static constexpr int kChunks = D / 8;                // 16-byte chunks per row
  static constexpr int kRowBytes = D * 2;
  static constexpr int kQBytes = kRows * kRowBytes;
  static constexpr int kStageBytes = kKeys * kRowBytes;  // K (or V) of one stage
  static constexpr int kStages = kStages_;
  static constexpr bool kFp8 = kFp8_;
  // bf16 K/V tiles: one per stage, or with an e4m3 cache one (prefill tiles) or none (decode
  // tiles), widened from the e4m3 stages ([kStages][K, V] rows of D bytes, then [kStages][K, V]
  // row scales) that follow them.
  static constexpr int kTileStages = kFp8 ? (kDecode ? 0 : 1) : kStages;
  static constexpr int kFp8StageBytes = kKeys * D;  // e4m3 K (or V) of one stage
  static constexpr int kFp8Bytes = kFp8 ? kStages * 2 * (kFp8StageBytes + kKeys * 4) : 0;
  static constexpr int kKvBytes = 2 * kTileStages * kStageBytes + kFp8Bytes;
  static constexpr int kOStride = D + 4;  // floats per row of the cross-warp merge
  // Decode epilogue, over the K/V stages: the warps' states, then the split-KV merge's row norms.
  static constexpr int kStatesBytes = kWarpsN * 16 * (kOStride * 4 + 8);
  static constexpr int kMergeBytes = kDecode ? kStatesBytes + kDecodeRows * 8 : 0;
  // + 1024: the base is rounded up to the 1024-byte alignment of the swizzle pattern.
  static constexpr int kSmemBytes =
      kQBytes + (kKvBytes > kMergeBytes ? kKvBytes : kMergeBytes) + 1024;
  static_assert(kQBytes % 1024 == 0 && kStageBytes % 1024 == 0, "1024-byte aligned tiles");
};

}  // namespace inflight::attention
