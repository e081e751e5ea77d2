// Launchers of the CUDA kernels, one per op (src/ops/<op>_cuda.cu). Each takes the params that
// make_<op>_params validated (ops/<op>.h) and enqueues its kernel on `stream`; none
// synchronises the host, so every launcher is graph-capturable. Element type: bf16 for
// activations, weights and the KV cache, fp32 accumulation inside the kernels; launchers throw
// Error(kUnsupported) for another dtype and Error(kInternal) when the launch fails.
// Zero-sized problems enqueue nothing.
//
// The kernels of a layer's chain (rms_norm or layer_norm, the GEMV, clamp, qk_norm,
// rope_kv_write, the attention tiles, swiglu or gelu) are launched with programmatic dependent
// launch (cuda_common.cuh): each lets the next one launch early and waits for its predecessor
// before touching activations, and the GEMV issues its first weight loads before that wait, so a
// decode step's weight streaming goes on across the small kernels between the GEMVs. The simple
// attention kernel, top-k, gather_rows, fill_random, the MoE kernels (but swiglu) and cuBLASLt
// launch as usual (they wait for everything before them).
//
// Plain C++ (no kernels) may include this header: it needs only the CUDA runtime API types.
#pragma once

#include <cuda_runtime_api.h>

#include "ops/clamp.h"
#include "ops/fill_random.h"
#include "ops/gather_rows.h"
#include "ops/gelu.h"
#include "ops/gemm.h"
#include "ops/layer_norm.h"
#include "ops/moe_experts.h"
#include "ops/moe_route.h"
#include "ops/paged_attention.h"
#include "ops/qk_norm.h"
#include "ops/quantize_fp8.h"
#include "ops/rms_norm.h"
#include "ops/rope_kv_write.h"
#include "ops/scaled_gemm.h"
#include "ops/swiglu.h"
#include "ops/token_bitmask.h"
#include "ops/top_k_logits.h"
#include "ops/vocab_padding_mask.h"

namespace inflight {

// Any 2- or 4-byte element type (bf16, f16, f32, i32): rows are copied bit for bit.
void gather_rows_cuda(const GatherRowsParams& p, cudaStream_t stream);

void rms_norm_cuda(const RmsNormParams& p, cudaStream_t stream);

void swiglu_cuda(const SwigluParams& p, cudaStream_t stream);

// MPT: LayerNorm (fused with the residual add, optional bias), exact GELU, clip_qkv.
void layer_norm_cuda(const LayerNormParams& p, cudaStream_t stream);
void gelu_cuda(const GeluParams& p, cudaStream_t stream);
void clamp_cuda(const ClampParams& p, cudaStream_t stream);

// head_dim <= kQkNormMaxHeadDim.
constexpr int64_t kQkNormMaxHeadDim = 512;
void qk_norm_cuda(const QkNormParams& p, cudaStream_t stream);

// Mixture of experts (ops/moe_route.h, ops/moe_experts.h): the router's top-k, then grouping
// by expert, the grouped expert GEMMs and the weighted combine (moe_experts_cuda.cu).
void moe_route_cuda(const MoeRouteParams& p, cudaStream_t stream);
// batch_invariant: always the grouped path (a token's result independent of the batch size);
// otherwise small batches take the per-pair GEMVs.
void moe_experts_cuda(const MoeExpertsParams& p, cudaStream_t stream, bool batch_invariant);

void rope_kv_write_cuda(const RopeKvWriteParams& p, cudaStream_t stream);

// head_dim <= kPagedAttentionMaxHeadDim.
constexpr int32_t kPagedAttentionMaxHeadDim = 256;
void paged_attention_cuda(const PagedAttentionParams& p, cudaStream_t stream);

// bf16 or f32.
void fill_random_cuda(const FillRandomParams& p, cudaStream_t stream);

// Row indices outside the logits are skipped.
void token_bitmask_cuda(const TokenBitmaskParams& p, cudaStream_t stream);

void vocab_padding_mask_cuda(const VocabPaddingMaskParams& p, cudaStream_t stream);

// k <= kTopKLogitsMax. Few rows are split over several blocks each (chunks per row), whose
// partials go to `workspace`: kTopKLogitsCudaWorkspaceBytes of device memory, zeroed once before
// its first launch and used by one stream (each launch leaves it as it found it). chunks 0: the
// launcher picks (top_k_logits_cuda_chunks; 1 without a workspace); tests and the lab
// (dev/cuda/top_k) force other counts.
constexpr int64_t kTopKLogitsCudaWorkspaceBytes = int64_t{1024} * (16 + 8 * kTopKLogitsMax);
int32_t top_k_logits_cuda_chunks(int64_t rows, int64_t vocab, int32_t k);
void top_k_logits_cuda(const TopKLogitsParams& p, void* workspace, cudaStream_t stream,
                       int32_t chunks = 0);

// What a GEMM does to each f32 sum (bias included) before its one rounding to y: nothing, or the
// exact GELU (MPT's up projection, fused into the GEMV's epilogue).
enum class GemmEpilogue { kNone, kGelu };

// The streaming GEMV for decode at small batch (src/ops/gemv_cuda.cu): m <= kGemvMaxRows, bf16
// operands, k % 8 == 0, 16-byte aligned x and w; bias optional, y bf16 or f32 (bf16 with the
// GELU).
constexpr int64_t kGemvMaxRows = 8;
bool gemv_cuda_supported(const GemmParams& p);
void gemv_cuda(const GemmParams& p, cudaStream_t stream,
               GemmEpilogue epilogue = GemmEpilogue::kNone);

// The plain CUDA-core GEMM (16x16 shared-memory tiles): the backend's fallback for shapes that
// cuBLASLt has no algorithm for, and a second opinion in tests. cuBLASLt does the real work
// (backend/cuda/cublaslt_gemm.h).
void gemm_cuda(const GemmParams& p, cudaStream_t stream);

// bf16 x -> e4m3 values + f32 scales (ops/quantize_fp8.h).
void quantize_fp8_cuda(const QuantizeFp8Params& p, cudaStream_t stream);

// The plain CUDA-core FP8 GEMM: the fallback of the cuBLASLt FP8 path and the batch-invariant
// kernel (group a multiple of 16 or 0). y bf16 (bias bf16) or f32 (bias f32).
void scaled_gemm_cuda(const ScaledGemmParams& p, cudaStream_t stream);

// The streaming FP8 GEMV for decode at small batch (src/ops/scaled_gemv_cuda.cu): m <=
// kGemvMaxRows, weights per tensor or per row, activations per row (or static), k % 16 == 0,
// 16-byte aligned x and w; bias optional, y bf16 or f32.
bool scaled_gemv_cuda_supported(const ScaledGemmParams& p);
void scaled_gemv_cuda(const ScaledGemmParams& p, cudaStream_t stream);

}  // namespace inflight
