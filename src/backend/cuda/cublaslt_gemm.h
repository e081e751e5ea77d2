// CublasLtGemm: y[m, n] = x[m, k] w[n, k]^T (+ bias[n]) through cuBLASLt, bf16 operands, fp32
// accumulation and scaling, bias fused as the matmul epilogue, y bf16 or f32 (the LM head).
//
// Row-major tensors are column-major matrices transposed, so the product is computed as the
// column-major D[n, m] = op(A)[n, k] B[k, m] with A = w stored k x n (transposed: op = T),
// B = x stored k x m, D = y stored n x m.
//
// The algorithm of each shape is chosen once by cuBLASLt's heuristic and cached with its
// descriptors, keyed by (m, n, k, bias, output type, operand alignments): a step only looks it
// up. A shape with no algorithm falls back to the plain CUDA-core kernel (ops/ops_cuda.cuh
// gemm_cuda).
//
// Small m (decode at batch <= kGemvMaxRows): the streaming GEMV of ops/gemv_cuda.cu (FP8:
// ops/scaled_gemv_cuda.cu) competes with cuBLASLt's choice; when a shape's plan is made (its
// first, eager use; never while a graph is captured) both run a few times on the stream, each
// run after the L2 is flushed (a step meets its weights cold), timed with events, and the faster
// is kept. That one-time measurement waits for the device; every later call only looks the plan
// up.
//
// Batch invariance: cuBLASLt picks different kernels (tile shapes, split-K) for different m, so
// a token's output can differ in its last bits with the batch it runs in. With
// `batch_invariant` every product runs on the CUDA-core kernel instead, whose reduction order
// depends on k only (slow: for tests and for users who need bitwise-reproducible serving).
// NOTE: not thread-safe; the owning backend calls it from one thread.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>

#include "ops/gemm.h"
#include "ops/ops_cuda.cuh"
#include "ops/scaled_gemm.h"

namespace inflight {

class CublasLtGemm {
 public:
  // `workspace` is device memory of `workspace_bytes` that outlives this object and is used
  // only on the stream passed to run().
  CublasLtGemm(void* workspace, size_t workspace_bytes, bool batch_invariant = false);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // Enqueues the product on `stream`. p comes from make_gemm_params; bf16 only. The GELU
  // epilogue (bf16 y) is fused where the GEMV takes the shape, a kernel of its own after the
  // product otherwise.
  void run(const GemmParams& p, cudaStream_t stream, GemmEpilogue epilogue = GemmEpilogue::kNone);
  // Enqueues the FP8 product (ops/scaled_gemm.h) on `stream`: cuBLASLt's e4m3 kernels with the
  // scale modes of the weight's format (Scaling below), or the CUDA-core kernel where cuBLASLt
  // has none (and in batch-invariant mode).
  void run(const ScaledGemmParams& p, cudaStream_t stream);

  // Shapes seen so far, and how many of them use the fallback kernel or the GEMV.
  size_t num_plans() const { return plans_.size(); }
  size_t num_fallback_plans() const;
  size_t num_gemv_plans() const;

 private:
  // The operands' format and cuBLASLt scale modes (A = w, B = x).
  enum class Scaling : uint8_t {
    kNone,    // bf16 x bf16
    kScalar,  // e4m3: one scale each (per-tensor weight, static activations)
    kOuter,   // e4m3: w per output channel [n] x activations per token [m]
    kBlocks,  // e4m3: w 128 x 128 blocks x activations 1 x 128 groups
  };
  struct Key {
    int64_t m, n, k;
    Scaling scaling;
    bool bias;
    bool f32_out;
    uint16_t align_x, align_w, align_y, align_bias;  // bytes of every row, powers of 2 <= 256
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& key) const;
  };
  struct Plan;  // descriptors + algorithm, or none (use the fallback)

  // The plan of `key`, made on first use. FP8 plans are asked of the heuristic with the scale
  // pointers of that first call set (cuBLASLt refuses vector scale modes without them).
  Plan& plan_for(const Key& key, const ScaledGemmParams* scaled = nullptr);
  // Sets the bias and scale pointers of p on the plan's descriptor.
  void set_pointers(Plan& plan, const ScaledGemmParams& p);
  // Chooses between cuBLASLt and the GEMV for a small-m plan by timing both on `stream`.
  void tune(Plan& plan, const GemmParams& p, cudaStream_t stream);
  // Whether the GEMV beats cuBLASLt for a plan of shape (m, n, k): `lt` runs cuBLASLt (false:
  // it refused the operands), `gemv` the GEMV; true without timing when cuBLASLt has no
  // algorithm or the stream is being captured.
  bool pick_gemv(Plan& plan, int64_t m, int64_t n, int64_t k, cudaStream_t stream,
                 const std::function<bool()>& lt, const std::function<void()>& gemv);
  void matmul(Plan& plan, const GemmParams& p, cudaStream_t stream);
  // The FP8 product through cuBLASLt; false when cuBLASLt refused it (the caller falls back).
  bool matmul(Plan& plan, const ScaledGemmParams& p, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  bool batch_invariant_;
  cudaEvent_t tune_start_ = nullptr;
  cudaEvent_t tune_stop_ = nullptr;
  std::unordered_map<Key, std::unique_ptr<Plan>, KeyHash> plans_;
};

}  // namespace inflight
