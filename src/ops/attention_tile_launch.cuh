// Host side of the tiled paged attention (attention_tile.cuh): the split-KV workspace and the
// plan that turns a PagedAttentionParams into at most two launches of the tile kernel (decode
// tiles, split-KV at small batch; prefill tiles of 64 or 128 rows). Included by
// paged_attention_cuda.cu and the attention lab.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/attention_tile.cuh"

namespace inflight::attention {

// Split-KV scratch: per-tile counters (zero between launches) and partial results.
struct SplitWorkspace {
  int32_t* counters = nullptr;  // kMaxSplitTiles
  float* data = nullptr;        // at least the bytes asked for
};
constexpr int64_t kMaxSplitTiles = 4096;
// The split-KV workspace of `stream` (one per stream, kept for the process' lifetime so that
// graphs captured with it stay valid), with at least `bytes` of data; nulls when it would have
// to grow while the stream is being captured. Defined in paged_attention_cuda.cu.
SplitWorkspace split_workspace(cudaStream_t stream, int64_t bytes);

template <int D, int kWarps, int kStages, bool kWgmma, bool kFp8>
void launch_prefill(const TileParams& tp, cudaStream_t stream) {
  using Prefill = TileShape<D, kWarps, 1, kStages, kFp8>;
  const PagedAttentionParams& p = tp.p;
  const int64_t tokens = p.num_tokens, seqs = p.num_seqs, g = tp.group;
  // A prefill sequence has at least 16 / g + 1 new tokens, so at most T / (16 / g + 1)
  // sequences are; the sum over them of ceil(n g / rows) is at most this bound.
  const int64_t prefill_seqs = std::min<int64_t>(seqs, tokens / (kDecodeRows / g + 1));
  const int64_t tiles = (tokens * g + (Prefill::kRows - 1) * prefill_seqs) / Prefill::kRows;
  const int64_t ctas = tiles * p.kv.num_kv_heads;
  INFLIGHT_CHECK(ctas <= cuda::kMaxGridX, "paged_attention_cuda: {} tiles exceed the grid", ctas);
  constexpr auto kKernel = paged_attention_tile_kernel<D, kWarps, 1, kStages, kWgmma, kFp8>;
  cuda::allow_dynamic_smem<kKernel, Prefill::kSmemBytes>();
  const dim3 grid(static_cast<unsigned>(ctas));
  cuda::launch_pdl(kKernel, grid, Prefill::kThreads, Prefill::kSmemBytes, stream, tp);
}

// Plans and enqueues the tile kernels for a validated bf16 problem with head_dim D over a bf16
// cache, or over an e4m3 cache with kFp8 (p.kv.fp8() must agree): a decode
// launch when GQA allows decode tiles, and a prefill launch when some sequence may have
// n * g > 16. Sizes come from host-side bounds only (num_tokens, num_seqs, max_context_len);
// no device memory is read.
//   kPrefillRows    64 or 128 rows per prefill tile; 0: 128 when the longest possible prefill
//                   alone fills two CTAs per SM with them, else 64
//   kPrefillStages, kDecodeStages   K/V stages in flight (decode grids resident at once take
//                   one more)
//   kWgmma          prefill by wgmma where the binary has sm_90a code
//   kDecodeWarps    key warps of a decode tile (16 keys each a stage): 4, and 2 for large
//                   e4m3 grids of head size 128; the lab forces 2 everywhere
template <int D, int kPrefillRows, int kPrefillStages, int kDecodeStages, bool kWgmma,
          bool kFp8 = false, int kDecodeWarps = 4>
void launch_tiles(const PagedAttentionParams& p, cudaStream_t stream) {
  TileParams tp;
  tp.p = p;
  tp.group = p.num_heads / p.kv.num_kv_heads;
  tp.scale_log2 = p.scale * kLog2e;
  INFLIGHT_CHECK(p.scale > 0.0f, "paged_attention_cuda: scale {} must be positive", p.scale);
  page_divider(tp, p.kv.block_size);
  const int64_t tokens = p.num_tokens, seqs = p.num_seqs, kv_heads = p.kv.num_kv_heads;
  const int64_t g = tp.group;
  INFLIGHT_CHECK(seqs <= cuda::kMaxGridYZ && kv_heads <= cuda::kMaxGridYZ,
                 "paged_attention_cuda: {} sequences x {} kv heads exceed the grid", seqs,
                 kv_heads);
  const int sms = cuda::num_sms();

  if (g <= kDecodeRows) {
    // Split-KV when (sequences x kv heads) would leave SMs idle: about two CTAs per SM.
    const int64_t ctas = seqs * kv_heads;
    if (ctas < sms && ctas <= kMaxSplitTiles && p.max_context_len > 0) {
      const int64_t range =
          p.sliding_window > 0
              ? std::min<int64_t>(p.max_context_len, p.sliding_window + kDecodeRows - 1)
              : p.max_context_len;
      const int64_t target = std::min<int64_t>(kMaxParts, (2 * sms + ctas - 1) / ctas);
      const int64_t part_len =
          std::max<int64_t>(kMinPartLen, ((range + target - 1) / target + 63) / 64 * 64);
      const int64_t parts = (range + part_len - 1) / part_len;
      if (parts > 1) {
        const int64_t items = ctas * parts * kDecodeRows;
        const SplitWorkspace ws =
            split_workspace(stream, items * static_cast<int64_t>(D * sizeof(float) + 8));
        if (ws.data != nullptr) {
          tp.part_len = static_cast<int32_t>(part_len);
          tp.max_parts = static_cast<int32_t>(parts);
          tp.partial_o = ws.data;
          tp.partial_ml = reinterpret_cast<float2*>(ws.data + items * D);
          tp.counters = ws.counters;
        }
      }
    }
    const dim3 grid(tp.max_parts, static_cast<unsigned>(seqs), static_cast<unsigned>(kv_heads));
    const auto launch_decode = [&]<int kWarps, int kStages>() {
      using Shape = TileShape<D, 1, kWarps, kStages, kFp8>;
      constexpr auto kKernel = paged_attention_tile_kernel<D, 1, kWarps, kStages, false, kFp8>;
      cuda::allow_dynamic_smem<kKernel, Shape::kSmemBytes>();
      cuda::launch_pdl(kKernel, grid, Shape::kThreads, Shape::kSmemBytes, stream, tp);
    };
    // A decode grid that is resident at once even at 2 CTAs per SM streams more bytes per CTA
    // with a stage more (Llama-3.1-8B shapes, 32 sequences x 2,048 keys, H100: e4m3 cache 95 ->
    // 77 us, bf16 107 -> 93; dev/cuda/attention/NOTES.md); larger grids keep the stages that let
    // 3 (bf16) or 4 (e4m3) CTAs share an SM (e4m3, 256 x 2,048 keys: 450 us, against 484 with a
    // stage more). e4m3 grids of head size 128 and three waves or more of those take tiles of 2
    // key warps and 3 stages, 6 CTAs to an SM: a CTA's latency chain is what bounds them, and
    // more of them overlap (1,024 sequences x 160 keys 176 -> 165 us, 256 x 512 123 -> 116;
    // grids resident at once lose: half the warps stream their keys; NOTES.md item 7).
    const int64_t grid_ctas = static_cast<int64_t>(tp.max_parts) * ctas;
    const auto narrow = [&] {  // instantiated for e4m3 and head size 128 only
      if constexpr (kFp8 && D == 128 && kDecodeWarps == 4) {
        if (grid_ctas >= 3 * sms * tile_min_blocks<1, 4, kDecodeStages, false, true>()) {
          launch_decode.template operator()<2, kDecodeStages + 1>();
          return true;
        }
      }
      return false;
    };
    if (grid_ctas <= 2 * sms) {
      launch_decode.template operator()<kDecodeWarps, kDecodeStages + 1>();
    } else if (!narrow()) {
      launch_decode.template operator()<kDecodeWarps, kDecodeStages>();
    }
  }

  // Every sequence has at least one new token, so the longest has at most T - S + 1.
  const int64_t max_new = tokens - seqs + 1;
  if (max_new * g > kDecodeRows) {
    const bool tall = kPrefillRows == 128 ||
                      (kPrefillRows == 0 && (max_new * g + 127) / 128 * kv_heads >= 2 * sms);
    if (tall) {
      launch_prefill<D, 8, kPrefillStages, kWgmma, kFp8>(tp, stream);
    } else {
      launch_prefill<D, 4, kPrefillStages, kWgmma, kFp8>(tp, stream);
    }
  }
}

}  // namespace inflight::attention
