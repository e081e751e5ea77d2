// top_k_logits lab bench: one block per row (chunks = 1, the kernel before the split path) against
// the launcher's pick (src/ops/top_k_logits_cuda.cu) on Llama 3's vocabulary, 128,256 ids:
// rows 1, 2, 4, 8, 32, 256 x k 1, 20, 50, 256; then, at one row, every chunk count of a sweep
// that the split path accepts, to check the pick.
//
// Each case first checks the pick against chunks = 1 (ids and values bit for bit, log-sum-exp
// within 1e-6 relative; the CPU reference is tests/cuda/serving_test). Timing: a spin kernel lets
// the host queue ahead, then events around kBatch back-to-back launches; the median of kRepeats
// such batches after kWarmup launches, per launch. Logits are random (a hashed sum of four
// uniforms); the rows stay in L2 between launches below ~50 MB (rows <= 32), as the LM head's
// output does in a decode step.
//
//   usage: top_k_bench [rows,...]    (default 1,2,4,8,32,256)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"
#include "ops/cuda_check.h"
#include "ops/ops_cuda.cuh"

namespace inflight::lab {
namespace {

#define CK(call) INFLIGHT_CUDA_CHECK(call)

constexpr int64_t kVocab = 128256;
constexpr int kWarmup = 10, kRepeats = 31, kBatch = 20;

__device__ uint32_t hash(uint64_t i, uint32_t seed) {
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32);
  h ^= h >> 16;
  h *= 0x7feb352dU;
  h ^= h >> 15;
  h *= 0x846ca68bU;
  h ^= h >> 16;
  return h;
}

// x[i] ~ 3 * (sum of four uniforms on [-1, 1)) / 2: roughly N(0, 3^2 / 3).
__global__ void fill_logits(float* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (uint32_t j = 0; j < 4; ++j) {
      s += static_cast<float>(hash(4 * static_cast<uint64_t>(i) + j, seed)) *
               (2.0f / 4294967296.0f) -
           1.0f;
    }
    x[i] = 1.5f * s;
  }
}

__global__ void spin(int64_t cycles) {
  const int64_t start = clock64();
  while (clock64() - start < cycles) {
  }
}

struct Buffers {
  float* logits = nullptr;  // [rows, kVocab]
  float* lse = nullptr;     // [rows]
  int32_t* ids = nullptr;   // [rows, kTopKLogitsMax]
  float* vals = nullptr;    // [rows, kTopKLogitsMax]
};

TopKLogitsParams params(const Buffers& b, int64_t rows, int32_t k) {
  TopKLogitsParams p;
  p.logits = b.logits;
  p.log_sum_exp = b.lse;
  p.top_ids = b.ids;
  p.top_logits = b.vals;
  p.rows = rows;
  p.vocab = kVocab;
  p.k = k;
  return p;
}

// Median microseconds per launch.
double time_us(const TopKLogitsParams& p, void* workspace, int32_t chunks, cudaStream_t stream) {
  for (int i = 0; i < kWarmup; ++i) top_k_logits_cuda(p, workspace, stream, chunks);
  cudaEvent_t start, stop;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  std::vector<double> us;
  for (int r = 0; r < kRepeats; ++r) {
    spin<<<1, 1, 0, stream>>>(200000);
    CK(cudaEventRecord(start, stream));
    for (int i = 0; i < kBatch; ++i) top_k_logits_cuda(p, workspace, stream, chunks);
    CK(cudaEventRecord(stop, stream));
    CK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(1e3 * ms / kBatch);
  }
  CK(cudaEventDestroy(start));
  CK(cudaEventDestroy(stop));
  std::nth_element(us.begin(), us.begin() + kRepeats / 2, us.end());
  return us[kRepeats / 2];
}

struct Result {
  std::vector<int32_t> ids;
  std::vector<uint32_t> vals;  // bits
  std::vector<float> lse;
};

Result run_once(const Buffers& b, const TopKLogitsParams& p, void* workspace, int32_t chunks,
                cudaStream_t stream) {
  const size_t n = static_cast<size_t>(p.rows) * p.k;
  CK(cudaMemsetAsync(b.ids, 0xff, n * sizeof(int32_t), stream));
  CK(cudaMemsetAsync(b.vals, 0xff, n * sizeof(float), stream));
  CK(cudaMemsetAsync(b.lse, 0xff, p.rows * sizeof(float), stream));
  top_k_logits_cuda(p, workspace, stream, chunks);
  Result r{std::vector<int32_t>(n), std::vector<uint32_t>(n),
           std::vector<float>(static_cast<size_t>(p.rows))};
  CK(cudaMemcpyAsync(r.ids.data(), b.ids, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  CK(cudaMemcpyAsync(r.vals.data(), b.vals, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CK(cudaMemcpyAsync(r.lse.data(), b.lse, p.rows * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CK(cudaStreamSynchronize(stream));
  return r;
}

// Whether `chunks` gives the results of one block per row.
bool same_as_one_block(const Buffers& b, const TopKLogitsParams& p, void* workspace, int32_t chunks,
                       cudaStream_t stream) {
  const Result want = run_once(b, p, workspace, 1, stream);
  const Result got = run_once(b, p, workspace, chunks, stream);
  double lse_err = 0.0;
  for (size_t r = 0; r < want.lse.size(); ++r) {
    lse_err = std::max(lse_err, std::fabs(static_cast<double>(got.lse[r]) - want.lse[r]) /
                                    std::max(1.0, std::fabs(static_cast<double>(want.lse[r]))));
  }
  const bool ok = got.ids == want.ids && got.vals == want.vals && lse_err <= 1e-6;
  if (!ok) {
    std::printf("MISMATCH rows %lld k %d chunks %d: ids %s, values %s, lse rel err %.2e\n",
                static_cast<long long>(p.rows), p.k, chunks, got.ids == want.ids ? "ok" : "differ",
                got.vals == want.vals ? "ok" : "differ", lse_err);
  }
  return ok;
}

int run(int argc, char** argv) {
  std::vector<int64_t> row_counts = {1, 2, 4, 8, 32, 256};
  if (argc > 1) {
    row_counts.clear();
    for (char* s = std::strtok(argv[1], ","); s != nullptr; s = std::strtok(nullptr, ",")) {
      row_counts.push_back(std::atoll(s));
    }
  }
  const int32_t ks[] = {1, 20, 50, 256};
  const int64_t max_rows = *std::max_element(row_counts.begin(), row_counts.end());

  int device = 0, sms = 0, driver = 0, runtime = 0;
  CK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, device));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CK(cudaDriverGetVersion(&driver));
  CK(cudaRuntimeGetVersion(&runtime));
  std::printf("device %s, %d SMs, driver %d, runtime %d; vocab %lld, median of %d x %d launches\n",
              prop.name, sms, driver, runtime, static_cast<long long>(kVocab), kRepeats, kBatch);

  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Buffers b;
  CK(cudaMalloc(&b.logits, max_rows * kVocab * sizeof(float)));
  CK(cudaMalloc(&b.lse, max_rows * sizeof(float)));
  CK(cudaMalloc(&b.ids, max_rows * kTopKLogitsMax * sizeof(int32_t)));
  CK(cudaMalloc(&b.vals, max_rows * kTopKLogitsMax * sizeof(float)));
  void* workspace = nullptr;
  CK(cudaMalloc(&workspace, kTopKLogitsCudaWorkspaceBytes));
  CK(cudaMemsetAsync(workspace, 0, kTopKLogitsCudaWorkspaceBytes, stream));
  fill_logits<<<4 * sms, 256, 0, stream>>>(b.logits, max_rows * kVocab, 12345u);
  CK(cudaGetLastError());

  bool all_ok = true;
  std::printf("\n%6s %4s %7s %12s %12s %8s\n", "rows", "k", "chunks", "1 block us", "picked us",
              "speedup");
  for (const int64_t rows : row_counts) {
    for (const int32_t k : ks) {
      const TopKLogitsParams p = params(b, rows, k);
      const int32_t chunks = top_k_logits_cuda_chunks(rows, kVocab, k);
      all_ok &= same_as_one_block(b, p, workspace, chunks, stream);
      const double old_us = time_us(p, workspace, 1, stream);
      const double new_us = chunks > 1 ? time_us(p, workspace, chunks, stream) : old_us;
      std::printf("%6lld %4d %7d %12.2f %12.2f %7.2fx\n", static_cast<long long>(rows), k, chunks,
                  old_us, new_us, old_us / new_us);
    }
  }

  std::printf("\nrow 1, chunk sweep (us per launch; * = the pick)\n");
  const int32_t sweep[] = {2, 4, 8, 16, 22, 24, 32, 40, 50, 64, 80, 100, 128, 163, 200, 250, 264};
  for (const int32_t k : ks) {
    const TopKLogitsParams p = params(b, 1, k);
    const int32_t pick = top_k_logits_cuda_chunks(1, kVocab, k);
    std::string line = "k " + std::to_string(k) + ":";
    for (const int32_t chunks : sweep) {
      try {
        all_ok &= same_as_one_block(b, p, workspace, chunks, stream);
      } catch (const Error&) {
        continue;  // the split path does not take this count for k
      }
      char cell[64];
      std::snprintf(cell, sizeof(cell), " %d%s=%.2f", chunks, chunks == pick ? "*" : "",
                    time_us(p, workspace, chunks, stream));
      line += cell;
    }
    std::printf("%s\n", line.c_str());
  }

  std::printf("\n%s\n", all_ok ? "all picks match one block per row" : "MISMATCHES (see above)");
  CK(cudaFree(workspace));
  CK(cudaFree(b.vals));
  CK(cudaFree(b.ids));
  CK(cudaFree(b.lse));
  CK(cudaFree(b.logits));
  CK(cudaStreamDestroy(stream));
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace inflight::lab

int main(int argc, char** argv) {
  try {
    return inflight::lab::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
