// vocab_padding_mask on CUDA: one block per row, threads over its padded columns (a few hundred
// at most: the kernel costs a launch).
#include <cuda_runtime.h>

#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

__global__ void vocab_padding_mask_kernel(VocabPaddingMaskParams p) {
  float* row = p.logits + static_cast<int64_t>(blockIdx.x) * p.columns;
  for (int64_t c = p.begin + threadIdx.x; c < p.columns; c += blockDim.x) row[c] = -INFINITY;
}

}  // namespace

void vocab_padding_mask_cuda(const VocabPaddingMaskParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.begin == p.columns) return;
  INFLIGHT_CHECK(p.rows <= cuda::kMaxGridX, "vocab_padding_mask_cuda: {} rows out of range",
                 p.rows);
  vocab_padding_mask_kernel<<<static_cast<unsigned>(p.rows), 256, 0, stream>>>(p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
