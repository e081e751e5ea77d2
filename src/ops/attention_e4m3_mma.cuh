// Decode tiles over an e4m3 cache (attention_tile.cuh): the MMAs read the staged e4m3 rows
// (attention_kv_stage.cuh: load_kv_stage_fp8, chunks placed by e4m3_offset) straight into f16
// fragments, with no widened tile in shared memory and no barrier for one. Every e4m3 value is
// an f16 (cvt.rn.f16x2.e4m3x2 is exact), and the scales, one per key, move out of the products:
//   scores  S[r, key] = (sum_d Q[r, d] K8[key, d]) * k_scale[key]        (f32)
//   output  O[r, :]  += sum_key (P[r, key] * v_scale[key] * kPScale) V8[key, :]
// with Q and the scaled P as f16 (saturated: |Q| > 65504 clamps) and kPScale lifting small
// probabilities times small scales out of f16's subnormal range; O is divided by it at the end.
//
// Fragment layouts (attention_mma.cuh; g = lane / 4, t = lane % 4), one warp's 16 keys:
//  - S = Q K^T. ldmatrix (b16 view, not transposed) gives lane the 4 bytes 4t..4t+3 of key g's
//    16-byte chunk, i.e. head dims 16 kk + 4t .. 4t + 3: its low pair serves as mma k 2t, 2t+1
//    (b0) and its high pair as k 2t+8, 2t+9 (b1). The sum over d does not care which k a dim
//    takes as long as Q agrees: Q's A fragments take the same dims (e4m3_q_fragments).
//  - O += P V. ldmatrix.trans gives lane, of a chunk's 8 keys x 8 byte pairs, the pairs of keys
//    2t and 2t+1 at dims 2g, 2g+1; one byte permute makes (key 2t, 2t+1) at dim 2g (low half)
//    and at dim 2g+1 (high half): b0 of two n8 tiles, even and odd dims; keys 8..15 give b1.
//    So output tile 2q + p (p = 0, 1) holds dims 16 q + 2 n + p of its columns n: lane's C
//    values of tiles 2q, 2q+1 are dims 16q + 4t .. 4t + 3 (e4m3_o_dims).
#pragma once

#include <cstdint>

#include "ops/attention_kv_stage.cuh"

namespace inflight::attention {

constexpr float kPScale = 256.0f;  // P * v_scale * kPScale as f16 (see above)

// Rewrites the bf16 Q tile at sq (tile_offset layout, kRows >= 16 rows, the first 16 used) in
// place as Q's f16 A fragments for dims taken as e4m3_scores takes them: uint4 [D / 16][32]
// (k16 step kk = dims 16 kk .. 16 kk + 15, lane), read back by each warp per block instead of
// held in 32 registers. Every thread of the block calls it (two barriers).
template <int D, int kRows, int kThreads>
__device__ __forceinline__ void e4m3_q_fragments(unsigned char* sq) {
  constexpr int kWarps = kThreads / 32, kSteps = (D / 16 + kWarps - 1) / kWarps;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, t = lane % 4;
  uint32_t f[kSteps][4];
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int kk = warp + i * kWarps;
    if (kk >= D / 16) break;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // Dims 16 kk + 4t .. 4t + 3 of rows g, g + 8: 8 bytes of chunk 2 kk + t / 2.
      const uint2 raw = *reinterpret_cast<const uint2*>(
          sq + tile_offset<kRows>(lane / 4 + 8 * h, 2 * kk + t / 2) + (t % 2) * 8);
      f[i][h] = pack_f16x2_sat(__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u));
      f[i][2 + h] =
          pack_f16x2_sat(__uint_as_float(raw.y << 16), __uint_as_float(raw.y & 0xffff0000u));
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int kk = warp + i * kWarps;
    if (kk >= D / 16) break;
    *reinterpret_cast<uint4*>(sq + (kk * 32 + lane) * 16) =
        make_uint4(f[i][0], f[i][1], f[i][2], f[i][3]);
  }
  __syncthreads();
}

// s += Q K8^T over keys kw0 .. kw0 + 15 of the e4m3 K rows at sk8 (shared address), Q from
// e4m3_q_fragments: s[4 nt + e] as mma_bf16's C tiles (keys kw0 + 8 nt + 2t + e % 2), unscaled.
template <int D>
__device__ __forceinline__ void e4m3_scores(float (&s)[8], const unsigned char* q_fragments,
                                            uint32_t sk8, int kw0) {
  const int lane = threadIdx.x % 32, m = lane / 8;
  // Matrix m of each x4: keys kw0 + 8 (m % 2) + 0..7, chunk 2 kp + m / 2.
  const int key = kw0 + (m % 2) * 8 + lane % 8;
#pragma unroll
  for (int kp = 0; kp < D / 32; ++kp) {
    uint32_t b[4];
    ldmatrix_x4(b, sk8 + e4m3_offset<D>(key, 2 * kp + m / 2));
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint4 q =
          *reinterpret_cast<const uint4*>(q_fragments + ((2 * kp + i) * 32 + lane) * 16);
      const uint32_t a[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const uint32_t x = b[2 * i + nt];
        mma_f16(*reinterpret_cast<float(*)[4]>(&s[4 * nt]), a, e4m3x2_to_f16x2(x),
                e4m3x2_to_f16x2(x >> 16));
      }
    }
  }
}

// o += P V8 over keys kw0 .. kw0 + 15 of the e4m3 V rows at sv8 (shared address), P the f16 A
// fragment of those keys; o's n8 tiles in the order above.
template <int D>
__device__ __forceinline__ void e4m3_pv(float (&o)[D / 2], const uint32_t (&a)[4], uint32_t sv8,
                                        int kw0) {
  const int lane = threadIdx.x % 32, m = lane / 8;
  // Matrix m of each x4: keys kw0 + 8 (m % 2) + 0..7, chunk 2 qp + m / 2.
  const int key = kw0 + (m % 2) * 8 + lane % 8;
#pragma unroll
  for (int qp = 0; qp < D / 32; ++qp) {
    uint32_t b[4];
    ldmatrix_x4_trans(b, sv8 + e4m3_offset<D>(key, 2 * qp + m / 2));
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int q = 2 * qp + i;
      // Bytes (key 2t: dim 2g, 2g+1; key 2t+1: dim 2g, 2g+1) -> (2t, 2t+1 at 2g; at 2g + 1),
      // of keys 0..7 (b0) and 8..15 (b1).
      const uint32_t k0 = __byte_perm(b[2 * i], 0, 0x3120);
      const uint32_t k8 = __byte_perm(b[2 * i + 1], 0, 0x3120);
      mma_f16(*reinterpret_cast<float(*)[4]>(&o[8 * q]), a, e4m3x2_to_f16x2(k0),
              e4m3x2_to_f16x2(k8));
      mma_f16(*reinterpret_cast<float(*)[4]>(&o[8 * q + 4]), a, e4m3x2_to_f16x2(k0 >> 16),
              e4m3x2_to_f16x2(k8 >> 16));
    }
  }
}

// Lane's 4 consecutive output dims 16 q + 4t .. 4t + 3 of row half h (rows g, g + 8) from
// e4m3_pv's tiles 2q and 2q + 1.
template <int D>
__device__ __forceinline__ float4 e4m3_o_dims(const float (&o)[D / 2], int q, int h) {
  return make_float4(o[8 * q + 2 * h], o[8 * q + 4 + 2 * h], o[8 * q + 2 * h + 1],
                     o[8 * q + 4 + 2 * h + 1]);
}

}  // namespace inflight::attention
