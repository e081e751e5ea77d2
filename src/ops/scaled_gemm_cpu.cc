// CPU reference of the FP8 GEMM (ops/scaled_gemm.h): the exact emulation the CUDA kernels are
// tested against. e4m3 bytes are decoded to f32 by table (exact), dot products of a k-group run
// in f32 partial sums summed in a fixed tree (ops/cpu_dot.h), each group's dot is scaled by sx * sw and
// the groups are summed in k order: y[i, j] depends only on row i of x, never on m.
#include <algorithm>
#include <vector>

#include "core/fp8.h"
#include "core/thread_pool.h"
#include "ops/cpu_dispatch.h"
#include "ops/cpu_dot.h"
#include "ops/scaled_gemm.h"

namespace inflight {

namespace {

INFLIGHT_CPU_CLONES void weight_rows(const ScaledGemmParams& p, const float* xf, int64_t j0,
                                     int64_t j1) {
  const float* table = e4m3_table();
  const int64_t k = p.k, group = p.group == 0 ? k : p.group;
  const int64_t groups = (k + group - 1) / group;
  std::vector<float> wf(static_cast<size_t>(k));
  auto* y = static_cast<float*>(p.y);
  const auto* bias = static_cast<const float*>(p.bias);
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* wq = p.w + j * k;
    for (int64_t c = 0; c < k; ++c) wf[static_cast<size_t>(c)] = table[wq[c]];
    const float* w_scales =
        p.w_scales + (p.w_scale_rows == 0 ? 0 : (j / p.w_scale_rows) * (p.group == 0 ? 1 : p.w_scale_stride));
    for (int64_t i = 0; i < p.m; ++i) {
      const float* xr = xf + i * k;
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t c0 = g * group, len = std::min(k, c0 + group) - c0;
        const float sx = p.x_scales[p.group == 0 ? i : g * p.m + i];
        acc += dot(xr + c0, wf.data() + c0, len) * sx * w_scales[p.group == 0 ? 0 : g];
      }
      y[i * p.n + j] = bias != nullptr ? acc + bias[j] : acc;
    }
  }
}

}  // namespace

void scaled_gemm_cpu(const ScaledGemmParams& p) {
  INFLIGHT_CHECK(p.y_dtype == DType::kF32, "scaled_gemm_cpu: f32 y only, got {}",
                 dtype_name(p.y_dtype));
  if (p.m == 0 || p.n == 0) return;
  // x decoded once: [m, k] f32 of the e4m3 values (unscaled).
  const float* table = e4m3_table();
  std::vector<float> xf(static_cast<size_t>(p.m * p.k));
  for (int64_t e = 0; e < p.m * p.k; ++e) xf[static_cast<size_t>(e)] = table[p.x[e]];
  ThreadPool::global().parallel_for(
      p.n, [&](int64_t j0, int64_t j1) { weight_rows(p, xf.data(), j0, j1); },
      /*min_chunk=*/std::max<int64_t>(1, 65536 / std::max<int64_t>(1, p.m * p.k)));
}

}  // namespace inflight
