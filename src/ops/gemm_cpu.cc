// CPU GEMM: y[m, n] = x[m, k] w[n, k]^T (+ bias).
//
// Both operands are row-major with k contiguous, so every output is a dot product of two
// contiguous rows. A micro-kernel computes an MR x NR tile of such dot products, each with
// kLanes independent partial sums that g++ -O3 turns into vector registers (no -ffast-math
// needed: the lanes are separate accumulators, not a reassociated reduction). Weight rows are
// visited in blocks that fit in L2, and all x rows stream past each block.
//
// The kernel is also compiled for AVX2 + FMA and picked at load time (ops/cpu_dispatch.h):
// about twice the prefill speed of the baseline x86-64 build.
#include <algorithm>

#include "core/thread_pool.h"
#include "ops/cpu_dispatch.h"
#include "ops/gemm.h"

namespace inflight {

namespace {

constexpr int kLanes = 8;  // partial sums per dot product
constexpr int kMr = 4;     // x rows per tile
constexpr int kNr = 4;     // w rows per tile
constexpr int64_t kL2BlockBytes = 256 * 1024;

// Sums the lanes in a fixed tree, then the scalar tail: the same order for every tile shape.
INFLIGHT_CPU_INLINE float finish(const float* lanes, float tail) {
  const float a = (lanes[0] + lanes[4]) + (lanes[1] + lanes[5]);
  const float b = (lanes[2] + lanes[6]) + (lanes[3] + lanes[7]);
  return (a + b) + tail;
}

// y[i, j] (+)= x[i, :] . w[j, :] for i < MR, j < NR.
template <int MR, int NR>
INFLIGHT_CPU_INLINE void micro_tile(const float* __restrict x, const float* __restrict w, int64_t k,
                                    const float* __restrict bias, float* __restrict y,
                                    int64_t ldy) {
  float acc[MR][NR][kLanes] = {};
  const int64_t k_vec = k / kLanes * kLanes;
  for (int64_t kk = 0; kk < k_vec; kk += kLanes) {
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        for (int l = 0; l < kLanes; ++l) acc[i][j][l] += x[i * k + kk + l] * w[j * k + kk + l];
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float tail = 0.0f;
      for (int64_t kk = k_vec; kk < k; ++kk) tail += x[i * k + kk] * w[j * k + kk];
      const float dot = finish(acc[i][j], tail);
      y[i * ldy + j] = bias != nullptr ? dot + bias[j] : dot;
    }
  }
}

template <int MR>
INFLIGHT_CPU_INLINE void row_block(const GemmParams& p, int64_t i0, int64_t j_begin,
                                   int64_t j_end) {
  const auto* x = static_cast<const float*>(p.x) + i0 * p.k;
  const auto* w = static_cast<const float*>(p.w);
  const auto* bias = static_cast<const float*>(p.bias);
  auto* y = static_cast<float*>(p.y) + i0 * p.n;
  int64_t j = j_begin;
  for (; j + kNr <= j_end; j += kNr) {
    micro_tile<MR, kNr>(x, w + j * p.k, p.k, bias ? bias + j : nullptr, y + j, p.n);
  }
  for (; j < j_end; ++j) {
    micro_tile<MR, 1>(x, w + j * p.k, p.k, bias ? bias + j : nullptr, y + j, p.n);
  }
}

// Weight rows [g_begin * kNr, g_end * kNr) for every x row.
INFLIGHT_CPU_CLONES
void run_groups(const GemmParams& p, int64_t g_begin, int64_t g_end, int64_t block_rows) {
  const int64_t j_begin = g_begin * kNr;
  const int64_t j_end = std::min(p.n, g_end * kNr);
  for (int64_t jb = j_begin; jb < j_end; jb += block_rows) {
    const int64_t je = std::min(j_end, jb + block_rows);
    int64_t i = 0;
    for (; i + kMr <= p.m; i += kMr) row_block<kMr>(p, i, jb, je);
    for (; i < p.m; ++i) row_block<1>(p, i, jb, je);
  }
}

}  // namespace

void gemm_cpu(const GemmParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32 && p.y_dtype == DType::kF32, "gemm_cpu: f32 only, got {}",
                 dtype_name(p.dtype));
  if (p.m == 0 || p.n == 0) return;
  // Weight rows per cache block: a block stays in L2 while every x row passes over it.
  const int64_t row_bytes = p.k * static_cast<int64_t>(sizeof(float));
  const int64_t block_rows = std::max<int64_t>(kNr, kL2BlockBytes / row_bytes / kNr * kNr);
  const int64_t num_groups = (p.n + kNr - 1) / kNr;  // parallel unit: kNr weight rows
  // Enough work per chunk to amortise the hand-off (~64K multiply-adds).
  const int64_t min_groups = std::max<int64_t>(1, 65536 / (p.m * p.k * kNr));
  ThreadPool::global().parallel_for(
      num_groups,
      [&](int64_t g_begin, int64_t g_end) { run_groups(p, g_begin, g_end, block_rows); },
      min_groups);
}

}  // namespace inflight
