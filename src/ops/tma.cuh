// Hopper's tensor memory accelerator (TMA) and the synchronization around it, as inline PTX
// (sm_90): 2D tensor maps over rows of bytes, bulk tensor copies global -> shared that complete
// on an mbarrier (transaction bytes), their multicast into every CTA of a cluster, mbarrier
// waits and arrivals (local or on another CTA of the cluster), cluster barriers, and the
// warpgroup register reallocation (setmaxnreg) of producer / consumer kernels.
//
// A pipeline of kStages shared slots runs on two mbarriers a slot: `full` (one arrival, the
// producer's expect_tx, plus the copies' bytes) says the slot landed; `empty` (one arrival per
// consumer warp) says it may be refilled. Waits name the phase by its parity: a slot's n-th use
// waits for full parity n & 1 and for empty parity (n & 1) ^ 1 (a fresh barrier counts as having
// completed the phase before its first).
//
// Compiled for every target: outside sm_90a (setmaxnreg is an sm_90a instruction) the device
// functions trap, and the kernels built on them are never launched there.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define INFLIGHT_TMA 1
#else
#define INFLIGHT_TMA 0
#endif

namespace inflight::cuda::tma {

// A 2D map over `rows` rows of `row_bytes` bytes (a multiple of 16; 16-byte aligned base), boxes
// of 128 bytes x box_rows rows (<= 256) landing with the 128-byte swizzle (16-byte chunk c of
// row r at chunk c ^ (r % 8): the layout wgmma descriptors with 128-byte swizzle read; the
// destination 1024-byte aligned). Out-of-bounds parts of a box are filled with zeros (and
// still counted as transaction bytes).
CUtensorMap map_2d_bytes(const void* base, int64_t rows, int64_t row_bytes, int box_rows);

#if INFLIGHT_TMA
#define INFLIGHT_TMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define INFLIGHT_TMA_ASM(...) __trap()
#endif

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  INFLIGHT_TMA_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// After the mbarrier inits, before any other thread or CTA of the cluster (or the TMA unit) uses
// them; then a block or cluster barrier.
__device__ __forceinline__ void fence_mbar_init() {
  INFLIGHT_TMA_ASM("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// The producer's arrival on `full`, announcing the bytes its copies will bring.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  INFLIGHT_TMA_ASM("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                   : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if INFLIGHT_TMA
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
#else
  __trap();
#endif
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  INFLIGHT_TMA_ASM("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Arrival on the barrier at the same shared address in CTA `cta` of the cluster. (Default
// .release.cta semantics: the slot's readers are the tensor cores, whose wgmmas were waited for;
// .release.cluster would order every earlier memory access of the thread first, and costs
// about as much as the product.)
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t cta) {
  INFLIGHT_TMA_ASM(
      "{\n.reg .b32 r;\nmapa.shared::cluster.u32 r, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [r];\n}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
}

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r = 0;
  INFLIGHT_TMA_ASM("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// Every thread of every CTA of the cluster.
__device__ __forceinline__ void cluster_sync() {
  INFLIGHT_TMA_ASM(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}

// Box (c0 bytes, c1 rows) of `map` into this CTA's shared memory at dst; completes on bar.
__device__ __forceinline__ void load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                        int32_t c0, int32_t c1) {
  INFLIGHT_TMA_ASM(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// The same into dst of every CTA of the cluster in `mask`, completing on the barrier at bar's
// address in each.
__device__ __forceinline__ void load_2d_multicast(uint32_t dst, const CUtensorMap* map,
                                                  uint32_t bar, int32_t c0, int32_t c1,
                                                  uint16_t mask) {
  INFLIGHT_TMA_ASM(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "h"(mask)
      : "memory");
}

// Warpgroup-wide (every thread of the warpgroup): the registers per thread from here on.
template <int N>
__device__ __forceinline__ void regs_up() {
  INFLIGHT_TMA_ASM("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void regs_down() {
  INFLIGHT_TMA_ASM("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

#undef INFLIGHT_TMA_ASM

}  // namespace inflight::cuda::tma
