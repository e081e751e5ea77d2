// cuBLASLt's first heuristic choice against the best of its top 16, timed, for the linear
// layers of Llama-3.1-8B (fp32 accumulation, y = x w^T as CublasLtGemm computes it) at the m of
// prefill, mixed and decode steps. Question: does timing the candidates once per m bucket pay
// for the offline figures (steps of 4,000-16,000 rows) or for TTFT (m = 128)? And what rate do
// the e4m3 products reach, with the FP8 layers' scales (a scalar each, or CublasLtGemm's
// per-channel x per-token outer vectors), against the 8192^3 product?
//
// Timing: weights rotated over copies (>= 512 MB in all, so nothing is served from L2 between
// calls), events around 20 back-to-back calls after a warm-up, median of 3 batches.
//
//   algo_lab [m,m,...] [bf16|e4m3|e4m3-outer]   (default 128,256,1024,2048,4352,8192,16384 bf16)
//   "square" as the m list: the 8192^3 product alone
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#define CK(call)                                                                     \
  do {                                                                               \
    const cudaError_t e = (call);                                                    \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)
#define LT(call)                                                                          \
  do {                                                                                    \
    const cublasStatus_t st_ = (call);                                                    \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                   \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cublasLtGetStatusName(st_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

namespace {

struct Shape {
  const char* name;
  int64_t n, k;
};

constexpr Shape kShapes[] = {
    {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
constexpr Shape kSquare[] = {{"8192^3", 8192, 8192}};
constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // as the backend

// n elements of `bytes` each (2: bf16, 1: e4m3) from a hash, uniform in [-0.05, 0.05) (bf16) or
// [-2, 2) (e4m3, as quantised activations and weights span it).
__global__ void fill(void* x, int64_t n, int bytes, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 0x2c1b3c6dU;
    h ^= h >> 12;
    const float u = static_cast<float>(h & 0xffff) / 65536.0f - 0.5f;
    if (bytes == 2) {
      static_cast<__nv_bfloat16*>(x)[i] = __float2bfloat16_rn(u * 0.1f);
    } else {
      static_cast<__nv_fp8_e4m3*>(x)[i] = __nv_fp8_e4m3(u * 4.0f);
    }
  }
}

// y[i] = bf16(sum over splits of parts[split][i]): the reduction of the batched split-K.
__global__ void sum_splits(const float* parts, int64_t n, int splits, __nv_bfloat16* y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < splits; ++s) acc += parts[s * n + i];
    y[i] = __float2bfloat16_rn(acc);
  }
}

// The largest |a - b| / (|a| + 1e-3) over n bf16 pairs, into *out (as float bits; >= 0).
__global__ void max_rel_diff(const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t n,
                             unsigned* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = __bfloat162float(a[i]), y = __bfloat162float(b[i]);
    const float r = fabsf(x - y) / (fabsf(x) + 1e-3f);
    atomicMax(out, __float_as_uint(r == r ? r : 1e30f));
  }
}

__global__ void fill_scales(float* s, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    s[i] = 0.01f + 0.001f * static_cast<float>(i % 7);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> ms = {128, 256, 1024, 2048, 4352, 8192, 16384};
  const bool square = argc > 1 && std::string(argv[1]) == "square";
  if (square) {
    ms = {8192};
  } else if (argc > 1) {
    ms.clear();
    std::stringstream list(argv[1]);
    for (std::string item; std::getline(list, item, ',');) ms.push_back(std::stoll(item));
  }
  const std::string precision = argc > 2 ? argv[2] : "bf16";
  if (precision != "bf16" && precision != "e4m3" && precision != "e4m3-outer") {
    std::fprintf(stderr, "precision: bf16, e4m3 or e4m3-outer\n");
    return 2;
  }
  const bool fp8 = precision != "bf16", outer = precision == "e4m3-outer";
  const int eb = fp8 ? 1 : 2;  // operand bytes
  const cudaDataType_t operand = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs; cuBLASLt %zu; %s operands\n", prop.name, prop.multiProcessorCount,
              cublasLtGetVersion(), precision.c_str());
  cublasLtHandle_t lt;
  LT(cublasLtCreate(&lt));
  void* workspace = nullptr;
  CK(cudaMalloc(&workspace, kWorkspaceBytes));
  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  std::printf("%-8s %6s %10s %10s %5s %9s %9s %7s\n", "shape", "m", "first us", "best us", "rank",
              "first TF", "best TF", "gain");
  for (const int64_t m : ms) {
    double m_first = 0, m_best = 0;
    for (const Shape& s :
         square ? std::span<const Shape>(kSquare) : std::span<const Shape>(kShapes)) {
      const int64_t w_elems = s.n * s.k;
      const int copies =
          static_cast<int>(std::max<int64_t>(1, (int64_t{512} << 20) / (w_elems * eb) + 1));
      char *w = nullptr, *x = nullptr;
      __nv_bfloat16* y = nullptr;
      float *w_scales = nullptr, *x_scales = nullptr;
      CK(cudaMalloc(&w, w_elems * eb * copies));
      CK(cudaMalloc(&x, m * s.k * eb));
      CK(cudaMalloc(&y, m * s.n * 2));
      CK(cudaMalloc(&w_scales, s.n * 4));
      CK(cudaMalloc(&x_scales, m * 4));
      fill<<<1024, 256, 0, stream>>>(w, w_elems * copies, eb, 1);
      fill<<<1024, 256, 0, stream>>>(x, m * s.k, eb, 2);
      fill_scales<<<64, 256, 0, stream>>>(w_scales, s.n);
      fill_scales<<<64, 256, 0, stream>>>(x_scales, m);

      cublasLtMatmulDesc_t op;
      LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
      LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
      if (fp8) {  // as CublasLtGemm: A = w (n scales), B = x (m scales)
        const cublasLtMatmulMatrixScale_t mode = outer ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                                       : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode,
                                          sizeof(mode)));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode,
                                          sizeof(mode)));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales,
                                          sizeof(w_scales)));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales,
                                          sizeof(x_scales)));
      }
      cublasLtMatrixLayout_t a, b, d;
      LT(cublasLtMatrixLayoutCreate(&a, operand, s.k, s.n, s.k));
      LT(cublasLtMatrixLayoutCreate(&b, operand, s.k, m, s.k));
      LT(cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, s.n, m, s.n));
      cublasLtMatmulPreference_t pref;
      LT(cublasLtMatmulPreferenceCreate(&pref));
      const uint64_t ws = kWorkspaceBytes;
      LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                              sizeof(ws)));
      cublasLtMatmulHeuristicResult_t results[16];
      int returned = 0;
      LT(cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, d, d, pref, 16, results, &returned));
      auto release = [&] {
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(d);
        cublasLtMatrixLayoutDestroy(b);
        cublasLtMatrixLayoutDestroy(a);
        cublasLtMatmulDescDestroy(op);
        CK(cudaFree(w));
        CK(cudaFree(x));
        CK(cudaFree(y));
        CK(cudaFree(w_scales));
        CK(cudaFree(x_scales));
      };
      if (returned == 0) {
        std::printf("%-8s %6lld no algorithm\n", s.name, static_cast<long long>(m));
        release();
        continue;
      }

      // us per call of `call` (weights rotated by its copy argument): median of 3 batches of 20.
      auto time_calls = [&](const std::function<void(int)>& call) {
        std::vector<double> per_call;
        int copy = 0;
        for (int batch = 0; batch < 3; ++batch) {
          CK(cudaEventRecord(e0, stream));
          for (int r = 0; r < 20; ++r) call(copy++ % copies);
          CK(cudaEventRecord(e1, stream));
          CK(cudaEventSynchronize(e1));
          float ms_total = 0;
          CK(cudaEventElapsedTime(&ms_total, e0, e1));
          per_call.push_back(1e3 * ms_total / 20);
        }
        std::sort(per_call.begin(), per_call.end());
        return per_call[1];
      };
      auto time_algo = [&](const cublasLtMatmulAlgo_t& algo) {
        const float alpha = 1.0f, beta = 0.0f;
        auto call = [&](int copy) {
          return cublasLtMatmul(lt, op, &alpha, w + copy * w_elems * eb, a, x, b, &beta, y, d, y, d,
                                &algo, workspace, kWorkspaceBytes, stream);
        };
        if (call(0) != CUBLAS_STATUS_SUCCESS) return 1e30;
        return time_calls([&](int copy) { LT(call(copy)); });
      };
      double first = 0, best = 1e30;
      int best_rank = 0;
      for (int i = 0; i < returned; ++i) {
        if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
        const double us = time_algo(results[i].algo);
        if (i == 0) first = us;
        if (us < best) {
          best = us;
          best_rank = i;
        }
      }
      const double flop = 2.0 * m * s.n * s.k;
      std::printf("%-8s %6lld %10.1f %10.1f %5d %9.0f %9.0f %6.1f%%\n", s.name,
                  static_cast<long long>(m), first, best, best_rank, flop / first / 1e6,
                  flop / best / 1e6, 100.0 * (first / best - 1.0));
      std::fflush(stdout);
      m_first += first;
      m_best += best;
      if (fp8 && m <= 512) {
        // Split-K at small m (few output tiles on 132 SMs): (a) cuBLASLt's own, set on the
        // heuristic's algorithm; (b) a strided batch over K slices into f32 parts (the outer
        // vector scales apply to each part alike), summed into bf16 by a second kernel. Each
        // checked against the unsplit product.
        __nv_bfloat16* y2 = nullptr;
        float* parts = nullptr;
        unsigned* diff = nullptr;
        CK(cudaMalloc(&y2, m * s.n * 2));
        CK(cudaMalloc(&parts, int64_t{8} * m * s.n * 4));
        CK(cudaMalloc(&diff, 4));
        const float alpha = 1.0f, beta = 0.0f;
        LT(cublasLtMatmul(lt, op, &alpha, w, a, x, b, &beta, y, d, y, d, &results[0].algo,
                          workspace, kWorkspaceBytes, stream));
        auto check = [&](const __nv_bfloat16* got) {
          CK(cudaMemsetAsync(diff, 0, 4, stream));
          max_rel_diff<<<256, 256, 0, stream>>>(y, got, m * s.n, diff);
          unsigned bits = 0;
          CK(cudaMemcpyAsync(&bits, diff, 4, cudaMemcpyDeviceToHost, stream));
          CK(cudaStreamSynchronize(stream));
          float r = 0;
          std::memcpy(&r, &bits, 4);
          return r;
        };
        int32_t splitk_support = 0;
        size_t written = 0;
        cublasLtMatmulAlgoCapGetAttribute(&results[0].algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT,
                                          &splitk_support, sizeof(splitk_support), &written);
        std::printf("    split-K: cuBLASLt cap %d;", splitk_support);
        for (const uint32_t splits : {2u, 4u, 8u}) {
          cublasLtMatmulAlgo_t algo = results[0].algo;
          const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
          cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                               sizeof(splits));
          cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                               &scheme, sizeof(scheme));
          cublasLtMatmulHeuristicResult_t checked{};
          if (cublasLtMatmulAlgoCheck(lt, op, a, b, d, d, &algo, &checked) !=
              CUBLAS_STATUS_SUCCESS) {
            std::printf(" lt/%u refused;", splits);
            continue;
          }
          if (cublasLtMatmul(lt, op, &alpha, w, a, x, b, &beta, y2, d, y2, d, &algo, workspace,
                             kWorkspaceBytes, stream) != CUBLAS_STATUS_SUCCESS) {
            std::printf(" lt/%u failed;", splits);
            continue;
          }
          const float err = check(y2);
          std::printf(" lt/%u %.1f us (diff %.1e);", splits, time_algo(algo), err);
        }
        for (const int splits : {2, 3, 4, 6, 8}) {
          if (s.k % (splits * 16) != 0) continue;
          const int64_t ks = s.k / splits;
          cublasLtMatrixLayout_t ab, bb, db;
          LT(cublasLtMatrixLayoutCreate(&ab, operand, ks, s.n, s.k));
          LT(cublasLtMatrixLayoutCreate(&bb, operand, ks, m, s.k));
          LT(cublasLtMatrixLayoutCreate(&db, CUDA_R_32F, s.n, m, s.n));
          const int32_t count = splits;
          const int64_t k_stride = ks, d_stride = m * s.n;
          for (auto* l : {ab, bb, db}) {
            LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                sizeof(count)));
          }
          LT(cublasLtMatrixLayoutSetAttribute(ab, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &k_stride, sizeof(k_stride)));
          LT(cublasLtMatrixLayoutSetAttribute(bb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &k_stride, sizeof(k_stride)));
          LT(cublasLtMatrixLayoutSetAttribute(db, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &d_stride, sizeof(d_stride)));
          cublasLtMatmulHeuristicResult_t r{};
          int got = 0;
          if (cublasLtMatmulAlgoGetHeuristic(lt, op, ab, bb, db, db, pref, 1, &r, &got) !=
                  CUBLAS_STATUS_SUCCESS ||
              got == 0) {
            std::printf(" batch/%d none;", splits);
          } else {
            auto call = [&](int copy) {
              LT(cublasLtMatmul(lt, op, &alpha, w + copy * w_elems * eb, ab, x, bb, &beta, parts,
                                db, parts, db, &r.algo, workspace, kWorkspaceBytes, stream));
              sum_splits<<<264, 256, 0, stream>>>(parts, m * s.n, splits, y2);
            };
            call(0);
            const float err = check(y2);
            std::printf(" batch/%d %.1f us (diff %.1e);", splits, time_calls(call), err);
          }
          cublasLtMatrixLayoutDestroy(db);
          cublasLtMatrixLayoutDestroy(bb);
          cublasLtMatrixLayoutDestroy(ab);
        }
        std::printf("\n");
        CK(cudaFree(y2));
        CK(cudaFree(parts));
        CK(cudaFree(diff));
      }
      release();
    }
    std::printf("%-8s %6lld %10.1f %10.1f       layer: %.1f%% faster with the best\n", "all",
                static_cast<long long>(m), m_first, m_best, 100.0 * (m_first / m_best - 1.0));
  }
  return 0;
}
