// token_bitmask on CUDA: one block per masked row, threads striding over its tokens (coalesced
// logits writes; a warp reads one mask word).
#include <cuda_runtime.h>

#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

__global__ void token_bitmask_kernel(TokenBitmaskParams p) {
  const int64_t m = blockIdx.x;
  const int32_t row = p.rows[m];
  if (row < 0 || row >= p.logits_rows) return;
  float* logits = p.logits + row * p.vocab;
  const uint32_t* mask = p.bitmask + m * p.words;
  for (int64_t v = threadIdx.x; v < p.vocab; v += blockDim.x) {
    if (((mask[v >> 5] >> (v & 31)) & 1u) == 0) logits[v] = -INFINITY;
  }
}

}  // namespace

void token_bitmask_cuda(const TokenBitmaskParams& p, cudaStream_t stream) {
  if (p.masked_rows == 0 || p.vocab == 0) return;
  token_bitmask_kernel<<<static_cast<unsigned>(p.masked_rows), 256, 0, stream>>>(p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
