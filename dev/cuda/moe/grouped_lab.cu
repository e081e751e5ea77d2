// Grouped expert GEMM lab: moe_experts_cuda and its two wgmma products (ops/moe_wgmma_gemm.cuh)
// at the shapes of Mixtral-8x7B and Qwen3-30B-A3B, bf16 and W8A8, timed with CUDA events, so
// that kernel variants can be compared in one device call instead of one engine run each.
//
//   grouped_lab [iterations] [case filter: a substring of the case names]
//
// For each case: random x, random distinct experts per token (uniform), random weights (e4m3
// with one scale per row for fp8), the MoE workspace of ops/moe_experts.h; one whole op
// (align, [quantize], gate/up, SwiGLU, down, combine) fills the tile table, then the median
// over `iterations` (default 20) of the op, of gate/up alone and of down alone, with their
// rate in TFLOP/s of useful products (2 pairs n k) and the bytes an ideal kernel reads from L2
// per product (a and w once per tile and column block). Staged with
// `LABS=dev/cuda/moe/grouped_lab.cu dev/cuda/device_run.sh stage build`; run
// `.devrun-serving/bin/grouped_lab` on the GPU machine.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops/cuda_common.cuh"
#include "ops/fp8_rows.cuh"
#include "ops/moe_wgmma_gemm.cuh"
#include "ops/ops_cuda.cuh"
#include "runtime/moe_workspace.h"

using namespace inflight;

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

namespace {

// Uniform in [-scale, scale): bf16 (fp8 false) or e4m3 bytes of values in [-448, 448).
__global__ void fill_kernel(void* p, int64_t n, bool fp8, float scale, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float u = static_cast<float>(h & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f;
    if (fp8) {
      static_cast<uint8_t*>(p)[i] = cuda::to_e4m3(u * 448.0f);
    } else {
      static_cast<cuda::bf16*>(p)[i] = cuda::to_bf16(u * scale);
    }
  }
}

void* device_fill(int64_t n, bool fp8, float scale, uint32_t seed) {
  void* p = nullptr;
  CHECK(cudaMalloc(&p, std::max<int64_t>(n, 1) * (fp8 ? 1 : 2)));
  fill_kernel<<<1024, 256>>>(p, n, fp8, scale, seed);
  CHECK(cudaGetLastError());
  return p;
}

struct Case {
  const char* name;
  int64_t tokens, experts, k, hidden, inter;
  bool fp8;
};

// Median milliseconds of `iterations` runs of f.
float median_ms(int iterations, const std::function<void()>& f) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < iterations; ++i) {
    CHECK(cudaEventRecord(a));
    f();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float t = 0.0f;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return ms[ms.size() / 2];
}

void run_case(const Case& c, int iterations) {
  const int64_t pairs = c.tokens * c.k;
  std::mt19937 rng(7);
  std::vector<int32_t> ids(pairs);
  std::vector<float> weights(pairs, 1.0f / static_cast<float>(c.k));
  std::vector<int32_t> perm(c.experts);
  for (int64_t t = 0; t < c.tokens; ++t) {
    for (int64_t e = 0; e < c.experts; ++e) perm[e] = static_cast<int32_t>(e);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::copy_n(perm.begin(), c.k, ids.begin() + t * c.k);
  }
  MoeExpertsParams p;
  p.x = device_fill(c.tokens * c.hidden, false, 2.0f, 1);
  p.gate_up_w = device_fill(c.experts * 2 * c.inter * c.hidden, c.fp8, 0.02f, 2);
  p.down_w = device_fill(c.experts * c.hidden * c.inter, c.fp8, 0.02f, 3);
  int32_t* ids_dev = nullptr;
  float* weights_dev = nullptr;
  CHECK(cudaMalloc(&ids_dev, pairs * sizeof(int32_t)));
  CHECK(cudaMalloc(&weights_dev, pairs * sizeof(float)));
  CHECK(cudaMemcpy(ids_dev, ids.data(), pairs * sizeof(int32_t), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(weights_dev, weights.data(), pairs * sizeof(float), cudaMemcpyHostToDevice));
  p.ids = ids_dev;
  p.weights = weights_dev;
  std::vector<void*> owned;
  if (c.fp8) {  // one scale per weight row
    for (MoeWeightScales* s : {&p.gate_up_scales, &p.down_scales}) {
      const int64_t rows = c.experts * (s == &p.gate_up_scales ? 2 * c.inter : c.hidden);
      std::vector<float> host(rows, 0.02f / 448.0f);
      float* dev = nullptr;
      CHECK(cudaMalloc(&dev, rows * sizeof(float)));
      CHECK(cudaMemcpy(dev, host.data(), rows * sizeof(float), cudaMemcpyHostToDevice));
      s->s = dev;
      s->rows_per = 1;
      s->stride = 1;
      owned.push_back(dev);
    }
  }
  // Raw device buffers in the workspace's shapes, in moe_workspace_buffers' order.
  std::vector<void*> buffers;
  const std::vector<MoeWorkspaceBuffer> layout =
      moe_workspace_buffers(c.tokens, c.k, c.experts, c.hidden, c.inter, DType::kBF16, c.fp8);
  if (layout.size() != 11) {
    std::fprintf(stderr, "the MoE workspace changed: update grouped_lab\n");
    std::exit(1);
  }
  for (const MoeWorkspaceBuffer& b : layout) {
    int64_t n = 1;
    for (const int64_t d : b.shape) n *= d;
    void* dev = nullptr;
    CHECK(cudaMalloc(&dev, n * dtype_size(b.dtype)));
    buffers.push_back(dev);
  }
  p.gate_up = buffers[0];
  p.act = buffers[1];
  p.expert_out = buffers[2];
  p.expert_offsets = static_cast<int32_t*>(buffers[3]);
  p.sorted_pairs = static_cast<int32_t*>(buffers[4]);
  p.pair_position = static_cast<int32_t*>(buffers[5]);
  p.tile_expert = static_cast<int32_t*>(buffers[6]);
  p.tile_start = static_cast<int32_t*>(buffers[7]);
  p.num_tiles = static_cast<int32_t*>(buffers[8]);
  if (c.fp8) {
    p.act_q = static_cast<uint8_t*>(buffers[9]);
    p.act_q_scales = static_cast<float*>(buffers[10]);
  }
  CHECK(cudaMalloc(&p.out, c.tokens * c.hidden * 2));
  p.tokens = c.tokens;
  p.hidden = c.hidden;
  p.inter = c.inter;
  p.num_experts = c.experts;
  p.k = static_cast<int32_t>(c.k);
  p.dtype = DType::kBF16;
  p.fp8_weights = c.fp8;

  const auto op = [&] { moe_experts_cuda(p, nullptr, /*batch_invariant=*/true); };
  op();  // the tile table (128-row tiles) for the products below
  CHECK(cudaDeviceSynchronize());
  MoeWgmmaGemm g;  // as moe_experts_cuda sets them up
  g.fp8 = c.fp8;
  if (c.fp8) {  // x's rows quantized in pair order (here act_q holds the SwiGLU's: same bytes)
    g.a = p.act_q;
    g.a_scales = p.act_q_scales;
    g.rows = pairs;
  } else {  // x's rows gathered in pair order into expert_out
    g.a = p.expert_out;
    g.a_scales = nullptr;
    g.rows = pairs;
  }
  g.experts = c.experts;
  g.w = p.gate_up_w;
  g.scales = p.gate_up_scales;
  g.y = static_cast<cuda::bf16*>(p.gate_up);
  g.tiles = p.tile_table();
  g.expected_rows = pairs;
  g.expected_tiles = moe_expected_tiles(pairs, c.experts);
  g.n = 2 * c.inter;
  g.k = c.hidden;
  MoeWgmmaGemm d = g;
  d.a = c.fp8 ? static_cast<const void*>(p.act_q) : p.act;
  d.w = p.down_w;
  d.scales = p.down_scales;
  d.y = static_cast<cuda::bf16*>(p.expert_out);
  d.n = c.hidden;
  d.k = c.inter;
  if (!moe_wgmma_gemm_fits(g) || !moe_wgmma_gemm_fits(d)) {
    std::printf("%-28s the wgmma kernel does not take these shapes\n", c.name);
    return;
  }
  const int64_t max_tiles = (pairs + kMoeWgmmaTileRows - 1) / kMoeWgmmaTileRows + c.experts;
  const float op_ms = median_ms(iterations, op);
  const float gu_ms = median_ms(iterations, [&] { moe_wgmma_gemm_cuda(g, max_tiles, nullptr); });
  const float dn_ms = median_ms(iterations, [&] { moe_wgmma_gemm_cuda(d, max_tiles, nullptr); });
  const auto tflops = [&](const MoeWgmmaGemm& m, float ms) {
    return 2.0 * static_cast<double>(pairs) * m.n * m.k / (ms * 1e-3) / 1e12;
  };
  // Every expert's weights once (each has rows at these sizes): the DRAM floor of a product.
  const auto weight_tbs = [&](const MoeWgmmaGemm& m, float ms) {
    return static_cast<double>(c.experts) * m.n * m.k * (c.fp8 ? 1 : 2) / (ms * 1e-3) / 1e12;
  };
  int32_t tiles = 0;
  CHECK(cudaMemcpy(&tiles, p.num_tiles, sizeof(tiles), cudaMemcpyDeviceToHost));
  std::printf("%-28s tiles %d (expected %lld)\n", c.name, tiles,
              static_cast<long long>(g.expected_tiles));
  std::printf(
      "%-28s op %8.3f ms | gate/up %8.3f ms %6.0f TFLOP/s %4.2f TB/s | down %8.3f ms %6.0f "
      "TFLOP/s %4.2f TB/s\n",
      c.name, op_ms, gu_ms, tflops(g, gu_ms), weight_tbs(g, gu_ms), dn_ms, tflops(d, dn_ms),
      weight_tbs(d, dn_ms));
  for (void* b : buffers) CHECK(cudaFree(b));
  for (void* b : owned) CHECK(cudaFree(b));
  for (const void* b : {p.x, p.gate_up_w, p.down_w, static_cast<const void*>(p.out)}) {
    CHECK(cudaFree(const_cast<void*>(b)));
  }
  CHECK(cudaFree(ids_dev));
  CHECK(cudaFree(weights_dev));
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 20;
  const std::string filter = argc > 2 ? argv[2] : "";
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const Case cases[] = {
      {"mixtral fp8 prefill 8192", 8192, 8, 2, 4096, 14336, true},
      {"mixtral fp8 decode 1024", 1024, 8, 2, 4096, 14336, true},
      {"mixtral fp8 decode 512", 512, 8, 2, 4096, 14336, true},
      {"mixtral fp8 decode 256", 256, 8, 2, 4096, 14336, true},
      {"mixtral fp8 decode 64", 64, 8, 2, 4096, 14336, true},
      {"mixtral bf16 prefill 8192", 8192, 8, 2, 4096, 14336, false},
      {"mixtral bf16 decode 1024", 1024, 8, 2, 4096, 14336, false},
      {"qwen3-moe fp8 prefill 8192", 8192, 128, 8, 2048, 768, true},
      {"qwen3-moe bf16 prefill 8192", 8192, 128, 8, 2048, 768, false},
      {"qwen3-moe bf16 decode 1024", 1024, 128, 8, 2048, 768, false},
  };
  for (const Case& c : cases) {
    if (std::string(c.name).find(filter) != std::string::npos) run_case(c, iterations);
  }
  return 0;
}
