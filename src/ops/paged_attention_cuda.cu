// paged_attention on CUDA: causal attention of a ragged batch (prefill, chunked prefill with a
// cached prefix, and decode in one call) over the paged KV cache; GQA; sliding window. bf16 q
// and out, a bf16 or e4m3 (scaled per token and kv head) cache; fp32 scores, softmax and
// accumulators.
//
// Two paths, picked on the host:
//  - tiles (attention_tile.cuh, planned in attention_tile_launch.cuh): head_dim 64 and 128 with
//    16-byte aligned tensors on sm_80+. Tensor-core tiles of query rows of one (sequence, kv
//    head) covering its whole GQA group: 64- or 128-row prefill tiles for sequences with
//    n * g > 16 new rows (wgmma on sm_90a), 16-row decode tiles (split-KV at small batch)
//    for the rest. At most two launches.
//  - simple (attention_simple.cuh): any even head_dim <= 256. One block of 4 warps per (query
//    token, query head), a warp-shuffle dot product per key, online softmax per warp.
#include <map>
#include <mutex>
#include <utility>

#include "ops/attention_simple.cuh"
#include "ops/attention_tile_launch.cuh"
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace attention {

SplitWorkspace split_workspace(cudaStream_t stream, int64_t bytes) {
  // One buffer per (device, stream): launches on one stream are ordered, so reuse between them
  // is safe. Sized for the largest plan launch_tiles makes (fewer than 3 CTAs per SM of 16
  // head_dim-128 rows) so that it never has to grow. Layout: kMaxSplitTiles counters (zeroed
  // here; each launch leaves them at zero), then the partials.
  // NOTE: never freed: a CUDA graph captured with a buffer keeps its address.
  static std::mutex mu;
  static std::map<std::pair<int, cudaStream_t>, std::pair<char*, int64_t>> buffers;
  constexpr int64_t kCounterBytes = kMaxSplitTiles * sizeof(int32_t);
  int device = 0;
  INFLIGHT_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mu);
  auto& [ptr, capacity] = buffers[{device, stream}];
  if (ptr == nullptr || capacity < bytes) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    INFLIGHT_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone) return {};
    const int64_t want = std::max<int64_t>(
        bytes, int64_t{3} * cuda::num_sms() * kDecodeRows * (128 * sizeof(float) + sizeof(float2)));
    void* fresh = nullptr;
    if (cudaMalloc(&fresh, static_cast<size_t>(kCounterBytes + want)) != cudaSuccess) {
      cudaGetLastError();  // out of memory: run without split-KV rather than fail
      return {};
    }
    // On `stream`: a non-blocking stream is not ordered after the legacy default stream.
    INFLIGHT_CUDA_CHECK(cudaMemsetAsync(fresh, 0, kCounterBytes, stream));
    ptr = static_cast<char*>(fresh);
    capacity = want;
  }
  return {reinterpret_cast<int32_t*>(ptr), reinterpret_cast<float*>(ptr + kCounterBytes)};
}

}  // namespace attention

void paged_attention_cuda(const PagedAttentionParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "paged_attention_cuda: bf16 only, got {}", dtype_name(p.dtype));
  INFLIGHT_CHECK_CODE(p.kv.head_dim <= kPagedAttentionMaxHeadDim, ErrorCode::kUnsupported,
                      "paged_attention_cuda: head_dim {} > {}", p.kv.head_dim,
                      kPagedAttentionMaxHeadDim);
  // Pair loads: head_dim is even (rope_kv_write requires it); the bases must be 4-aligned.
  INFLIGHT_CHECK_CODE(p.kv.head_dim % 2 == 0 && cuda::aligned(p.q, 4) && cuda::aligned(p.kv.k, 4) &&
                          cuda::aligned(p.kv.v, 4),
                      ErrorCode::kUnsupported,
                      "paged_attention_cuda: needs an even head_dim and 4-byte aligned q/k/v");
  if (p.num_tokens == 0 || p.num_heads == 0) return;
  // Tiles: 16-byte copies of whole rows of q, out, K and V.
  const bool tiles = (p.kv.head_dim == 64 || p.kv.head_dim == 128) && cuda::aligned(p.q, 16) &&
                     cuda::aligned(p.out, 16) && cuda::aligned(p.kv.k, 16) &&
                     cuda::aligned(p.kv.v, 16) &&
                     cuda::compute_capability_major() >= 8;  // cp.async, ldmatrix, mma.sync
  // Prefill tiles of 64 or 128 rows (wgmma on sm_90a), K/V double-buffered.
  if (tiles) {
    const bool fp8 = p.kv.fp8();
    if (p.kv.head_dim == 64) {
      fp8 ? attention::launch_tiles<64, 0, 2, 2, true, true>(p, stream)
          : attention::launch_tiles<64, 0, 2, 2, true>(p, stream);
    } else {
      fp8 ? attention::launch_tiles<128, 0, 2, 2, true, true>(p, stream)
          : attention::launch_tiles<128, 0, 2, 2, true>(p, stream);
    }
    return;
  }
  INFLIGHT_CHECK(p.num_tokens <= cuda::kMaxGridX && p.num_heads <= cuda::kMaxGridYZ,
                 "paged_attention_cuda: grid {} x {} is too large", p.num_tokens, p.num_heads);
  attention::launch_simple(p, stream);
}

}  // namespace inflight
