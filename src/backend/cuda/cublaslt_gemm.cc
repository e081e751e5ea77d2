#include "backend/cuda/cublaslt_gemm.h"

#include <functional>
#include <memory>

#include "core/logging.h"
#include "ops/cuda_check.h"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

// The largest power of two (up to 256) that divides both the address and the row stride in
// bytes: the alignment of every row of the operand, which is what cuBLASLt may assume.
uint16_t alignment_of(const void* ptr, int64_t row_elems, size_t elem_bytes = 2) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(ptr) |
                      static_cast<uintptr_t>(row_elems) * elem_bytes | uintptr_t{256};
  return static_cast<uint16_t>(v & (~v + 1));
}

}  // namespace

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // w: k x n, column-major, transposed by op
  cublasLtMatrixLayout_t b = nullptr;  // x: k x m
  cublasLtMatrixLayout_t d = nullptr;  // y: n x m (also the layout of C, unused with beta 0)
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;
  bool tuned = false;     // small m: the GEMV / cuBLASLt choice is made
  bool use_gemv = false;  // small m, and the GEMV was faster (or cuBLASLt has no algorithm)

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    // Destroy calls only free host memory; errors are ignored in a destructor.
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

size_t CublasLtGemm::KeyHash::operator()(const Key& key) const {
  size_t h = std::hash<int64_t>()(key.m);
  auto mix = [&h](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  mix(static_cast<uint64_t>(key.n));
  mix(static_cast<uint64_t>(key.k));
  mix((static_cast<uint64_t>(key.align_x) << 48) | (static_cast<uint64_t>(key.align_w) << 32) |
      (static_cast<uint64_t>(key.align_y) << 16) | key.align_bias);
  mix((key.bias ? 1 : 0) | (key.f32_out ? 2 : 0) | (static_cast<uint64_t>(key.scaling) << 2));
  return h;
}

CublasLtGemm::CublasLtGemm(void* workspace, size_t workspace_bytes, bool batch_invariant)
    : workspace_(workspace), workspace_bytes_(workspace_bytes), batch_invariant_(batch_invariant) {
  INFLIGHT_CUBLAS_CHECK(cublasLtCreate(&handle_));
  INFLIGHT_CUDA_CHECK(cudaEventCreate(&tune_start_));
  INFLIGHT_CUDA_CHECK(cudaEventCreate(&tune_stop_));
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (tune_stop_ != nullptr) cudaEventDestroy(tune_stop_);
  if (tune_start_ != nullptr) cudaEventDestroy(tune_start_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

size_t CublasLtGemm::num_gemv_plans() const {
  size_t n = 0;
  for (const auto& [key, plan] : plans_) n += plan->use_gemv ? 1 : 0;
  return n;
}

size_t CublasLtGemm::num_fallback_plans() const {
  size_t n = 0;
  for (const auto& [key, plan] : plans_) n += plan->has_algo ? 0 : 1;
  return n;
}

CublasLtGemm::Plan& CublasLtGemm::plan_for(const Key& key, const ScaledGemmParams* scaled) {
  const auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;

  auto plan = std::make_unique<Plan>();
  INFLIGHT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  INFLIGHT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                       &trans_a, sizeof(trans_a)));
  INFLIGHT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB,
                                                       &trans_b, sizeof(trans_b)));
  const bool fp8 = key.scaling != Scaling::kNone;
  if (fp8) {
    // A = w, B = x (see the header): their scale modes.
    cublasLtMatmulMatrixScale_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    cublasLtMatmulMatrixScale_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    switch (key.scaling) {
      case Scaling::kOuter:
        a_mode = b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        break;
      case Scaling::kBlocks:
        a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
        b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
        break;
      default:
        break;
    }
    INFLIGHT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode)));
    INFLIGHT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode)));
  }
  if (key.bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bias_type = key.f32_out ? CUDA_R_32F : CUDA_R_16BF;
    INFLIGHT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                         &epilogue, sizeof(epilogue)));
    INFLIGHT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  if (scaled != nullptr) set_pointers(*plan, *scaled);
  const auto m = static_cast<uint64_t>(key.m), n = static_cast<uint64_t>(key.n);
  const auto k = static_cast<uint64_t>(key.k);
  const cudaDataType_t operand_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  INFLIGHT_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan->a, operand_type, k, n, static_cast<int64_t>(k)));
  INFLIGHT_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan->b, operand_type, k, m, static_cast<int64_t>(k)));
  INFLIGHT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->d, key.f32_out ? CUDA_R_32F : CUDA_R_16BF,
                                                   n, m, static_cast<int64_t>(n)));

  cublasLtMatmulPreference_t pref = nullptr;
  INFLIGHT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t max_workspace = workspace_bytes_;
  const uint32_t align_a = key.align_w, align_b = key.align_x, align_d = key.align_y;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* value, size_t size) {
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulPreferenceSetAttribute(pref, attr, value, size);
    }
  };
  set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof(max_workspace));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->d, plan->d,
                                            pref, 1, &result, &returned);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (status == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    plan->algo = result.algo;
    plan->has_algo = true;
  } else {
    INFLIGHT_LOG_WARN(
        "cuBLASLt has no algorithm for {} gemm m={} n={} k={} bias={} ({}): using the CUDA-core "
        "kernel",
        fp8 ? "fp8" : "bf16", key.m, key.n, key.k, key.bias, cublasLtGetStatusName(status));
  }
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void CublasLtGemm::run(const GemmParams& p, cudaStream_t stream, GemmEpilogue epilogue) {
  INFLIGHT_CHECK_CODE(
      p.dtype == DType::kBF16 && (p.y_dtype == DType::kBF16 || p.y_dtype == DType::kF32),
      ErrorCode::kUnsupported,
      "cublaslt gemm: bf16 operands with a bf16 or f32 output only, got {} -> {}",
      dtype_name(p.dtype), dtype_name(p.y_dtype));
  if (p.m == 0 || p.n == 0) return;
  if (batch_invariant_) {
    gemm_cuda(p, stream);
  } else {
    const bool f32_out = p.y_dtype == DType::kF32;
    const Key key{p.m,
                  p.n,
                  p.k,
                  Scaling::kNone,
                  p.bias != nullptr,
                  f32_out,
                  alignment_of(p.x, p.k),
                  alignment_of(p.w, p.k),
                  alignment_of(p.y, p.n, f32_out ? 4 : 2),
                  alignment_of(p.bias, 0)};
    Plan& plan = plan_for(key);
    if (!plan.tuned) tune(plan, p, stream);
    if (plan.use_gemv) {
      gemv_cuda(p, stream, epilogue);  // the GELU in its epilogue
      return;
    }
    if (plan.has_algo) {
      matmul(plan, p, stream);
    } else {
      gemm_cuda(p, stream);
    }
  }
  if (epilogue == GemmEpilogue::kGelu) {  // over y, in place
    GeluParams g;
    g.x = p.y;
    g.out = p.y;
    g.numel = p.m * p.n;
    g.dtype = p.y_dtype;
    gelu_cuda(g, stream);
  }
}

void CublasLtGemm::matmul(Plan& plan, const GemmParams& p, cudaStream_t stream) {
  if (p.bias != nullptr) {
    INFLIGHT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                         &p.bias, sizeof(p.bias)));
  }
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status =
      cublasLtMatmul(handle_, plan.op, &alpha, p.w, plan.a, p.x, plan.b, &beta, p.y, plan.d, p.y,
                     plan.d, &plan.algo, workspace_, workspace_bytes_, stream);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    // The heuristic's choice refused the operands after all: this shape uses the fallback.
    INFLIGHT_LOG_WARN("cuBLASLt refused gemm m={} n={} k={}: using the CUDA-core kernel", p.m, p.n,
                      p.k);
    plan.has_algo = false;
    gemm_cuda(p, stream);
    return;
  }
  INFLIGHT_CUBLAS_CHECK(status);
}

void CublasLtGemm::run(const ScaledGemmParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.y_dtype == DType::kBF16 || p.y_dtype == DType::kF32,
                      ErrorCode::kUnsupported, "cublaslt fp8 gemm: bf16 or f32 output only, got {}",
                      dtype_name(p.y_dtype));
  if (p.m == 0 || p.n == 0) return;
  // What cuBLASLt's e4m3 kernels take on sm_90 (TN, f32 scales): k % 16 == 0; per-tensor x
  // per-tensor, per-channel x per-token (both vectors), or 128 x 128 weight blocks x 1 x 128
  // activation groups (token-contiguous scales, m % 4 == 0; decode's m < 4 is not). The rest
  // (1 x 128 weight groups, odd shapes) runs on the CUDA-core kernel.
  const bool blocks = p.group != 0;
  const bool lt_shape =
      p.k % 16 == 0 && (!blocks || (p.group == 128 && p.w_scale_rows == 128 && p.m % 4 == 0));
  if (batch_invariant_ || !lt_shape) {
    scaled_gemm_cuda(p, stream);
    return;
  }
  Scaling scaling = Scaling::kOuter;
  if (blocks) {
    scaling = Scaling::kBlocks;
  } else if (p.w_scale_rows == 0 && p.static_x_scale) {
    scaling = Scaling::kScalar;
  }
  INFLIGHT_CHECK(scaling != Scaling::kOuter || p.w_scale_rows == 1,
                 "cublaslt fp8 gemm: a per-tensor weight scale needs static activations "
                 "(dynamic ones take per-channel scales)");
  const bool f32_out = p.y_dtype == DType::kF32;
  const Key key{p.m,
                p.n,
                p.k,
                scaling,
                p.bias != nullptr,
                f32_out,
                alignment_of(p.x, p.k, 1),
                alignment_of(p.w, p.k, 1),
                alignment_of(p.y, p.n, f32_out ? 4 : 2),
                alignment_of(p.bias, 0)};
  Plan& plan = plan_for(key, &p);
  if (!plan.tuned) {
    plan.tuned = true;
    if (p.m <= kGemvMaxRows && scaled_gemv_cuda_supported(p)) {
      plan.use_gemv = pick_gemv(
          plan, p.m, p.n, p.k, stream, [&] { return matmul(plan, p, stream); },
          [&] { scaled_gemv_cuda(p, stream); });
    }
  }
  if (plan.use_gemv) {
    scaled_gemv_cuda(p, stream);
    return;
  }
  if (!plan.has_algo || !matmul(plan, p, stream)) scaled_gemm_cuda(p, stream);
}

void CublasLtGemm::set_pointers(Plan& plan, const ScaledGemmParams& p) {
  auto set = [&](cublasLtMatmulDescAttributes_t attr, const void* ptr) {
    INFLIGHT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, attr, &ptr, sizeof(ptr)));
  };
  if (p.bias != nullptr) set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
  set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p.w_scales);
  set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
      p.static_x_scale && p.group == 0 && p.w_scale_rows == 0 ? p.static_x_scale_ptr : p.x_scales);
}

bool CublasLtGemm::matmul(Plan& plan, const ScaledGemmParams& p, cudaStream_t stream) {
  set_pointers(plan, p);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status =
      cublasLtMatmul(handle_, plan.op, &alpha, p.w, plan.a, p.x, plan.b, &beta, p.y, plan.d, p.y,
                     plan.d, &plan.algo, workspace_, workspace_bytes_, stream);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    INFLIGHT_LOG_WARN("cuBLASLt refused fp8 gemm m={} n={} k={}: using the CUDA-core kernel", p.m,
                      p.n, p.k);
    plan.has_algo = false;
    return false;
  }
  INFLIGHT_CUBLAS_CHECK(status);
  return true;
}

void CublasLtGemm::tune(Plan& plan, const GemmParams& p, cudaStream_t stream) {
  plan.tuned = true;
  if (p.m > kGemvMaxRows || !gemv_cuda_supported(p)) return;
  plan.use_gemv = pick_gemv(
      plan, p.m, p.n, p.k, stream,
      [&] {
        matmul(plan, p, stream);
        return plan.has_algo;
      },
      [&] { gemv_cuda(p, stream); });
}

bool CublasLtGemm::pick_gemv(Plan& plan, int64_t m, int64_t n, int64_t k, cudaStream_t stream,
                             const std::function<bool()>& lt, const std::function<void()>& gemv) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  INFLIGHT_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  // Nothing to compare with, or no way to time now.
  if (!plan.has_algo || capture != cudaStreamCaptureStatusNone) return true;
  // Each candidate is timed as a decode step meets it, its weight cold: a step reads gigabytes
  // of weights, each once, so none is in L2 when its product starts. Timed warm, cuBLASLt's
  // tiles gain from an L2 that holds a whole projection (17-25 MB at FP8) and win choices they
  // lose in a step. So before each timed run the stream writes twice the L2's size of scratch
  // memory (without it, when it cannot be had, the runs are timed warm).
  int device = 0, l2_bytes = 0;
  INFLIGHT_CUDA_CHECK(cudaGetDevice(&device));
  INFLIGHT_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  const size_t flush_bytes = 2 * static_cast<size_t>(l2_bytes);
  void* scratch = nullptr;
  if (cudaMalloc(&scratch, flush_bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // out of memory is not sticky: clear it, time warm
    scratch = nullptr;
  }
  const std::unique_ptr<void, cudaError_t (*)(void*)> flush(scratch, cudaFree);
  constexpr int kReps = 5;
  const auto time_ms = [&](const std::function<void()>& launch) {
    launch();  // warm-up: lazy module loading
    float total = 0.0f;
    for (int i = 0; i < kReps; ++i) {
      if (flush) INFLIGHT_CUDA_CHECK(cudaMemsetAsync(flush.get(), i, flush_bytes, stream));
      INFLIGHT_CUDA_CHECK(cudaEventRecord(tune_start_, stream));
      launch();
      INFLIGHT_CUDA_CHECK(cudaEventRecord(tune_stop_, stream));
      INFLIGHT_CUDA_CHECK(cudaEventSynchronize(tune_stop_));
      float ms = 0.0f;
      INFLIGHT_CUDA_CHECK(cudaEventElapsedTime(&ms, tune_start_, tune_stop_));
      total += ms;
    }
    return total / kReps;
  };
  if (!lt()) return true;  // cuBLASLt refused the operands: plan.has_algo is now false
  const float lt_ms = time_ms([&] { lt(); });
  const float gemv_ms = time_ms(gemv);
  const bool use_gemv = gemv_ms < lt_ms;
  INFLIGHT_LOG_DEBUG("gemm m={} n={} k={}: cuBLASLt {:.1f} us, GEMV {:.1f} us ({} L2) -> {}", m, n,
                     k, lt_ms * 1e3f, gemv_ms * 1e3f, flush ? "cold" : "warm",
                     use_gemv ? "GEMV" : "cuBLASLt");
  return use_gemv;
}

}  // namespace inflight
