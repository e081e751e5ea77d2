// Paged-attention lab bench: version 1 (the simple kernel, src/ops/attention_simple.cuh) against
// the tile path (src/ops/attention_tile.cuh, as paged_attention_cuda runs it: "tile us", plus
// lab variants) and the previous tile path, version 4 (v4_tile.cuh: "v4 us", same run, same
// inputs), on
// Llama-3.1-8B attention shapes: 32 query heads, 8 kv heads, head_dim 128, pages of 16.
//
//   decode  batch 1/32/256 x context 512/2048/8192 (one new token per sequence), and batch 1 at
//           130-400 tokens (where split-KV parts are few and short)
//   prefill one sequence of 512, 2048 or 8192 new tokens; mixed: a 512-token chunk at context
//   2048 + 63 decodes at 2048, and two 2,048-token prompts + 256 decodes at 2,112.
//
// Floors: bytes = K and V of every context token once (+ q and out), over the measured read
// bandwidth; FLOPs = 4 * D * H * (keys each query row attends), over the measured (cuBLASLt via
// PyTorch, run by the device script) bf16 matrix rate, passed as argv[1] in TFLOP/s.
// LAB_KV=fp8 runs every case over an e4m3 cache with a scale per (token, kv head), as
// `--kv-cache-dtype fp8` stores it (version 4 reads bf16 caches only: its column is 0 then).
// Each case checks the tile path against version 1 (rel. L2 of the bf16 outputs, NaN count)
// before timing. Timing: a spin kernel lets the host queue ahead, then events around R calls
// rotating over enough copies of the KV cache (distinct blocks) to defeat the 50 MB L2; the
// median over batches of R calls.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "dev/cuda/attention/persistent_decode.cuh"
#include "dev/cuda/attention/v4_tile.cuh"
#include "ops/attention_simple.cuh"
#include "ops/attention_tile_launch.cuh"
#include "ops/fp8_rows.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight::lab {
namespace {

using cuda::bf16;

#define CK(call) INFLIGHT_CUDA_CHECK(call)

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlockSize = 16;

// amp x uniform in [-1, 1), from a hash of (i, seed): bf16 values, or e4m3 bytes (never NaN).
template <typename T>
__global__ void fill_random(T* x, int64_t n, uint32_t seed, float amp) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32);
    h ^= h >> 16;
    h *= 0x7feb352dU;
    h ^= h >> 15;
    h *= 0x846ca68bU;
    h ^= h >> 16;
    const float v = amp * (static_cast<float>(h) * (2.0f / 4294967296.0f) - 1.0f);
    if constexpr (sizeof(T) == 1) {
      x[i] = cuda::to_e4m3(v);
    } else {
      x[i] = __float2bfloat16_rn(v);
    }
  }
}

// A constant (the e4m3 cache's scales).
__global__ void fill_const(float* x, int64_t n, float value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = value;
  }
}

__global__ void spin(int64_t cycles) {
  const int64_t start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void read_bytes(const uint4* x, int64_t n, uint4* sink) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = x[i];
    acc.x ^= v.x;
    acc.y ^= v.y;
    acc.z ^= v.z;
    acc.w ^= v.w;
  }
  if (acc.x == 0x12345678u) sink[0] = acc;  // practically never: keeps the loads alive
}

struct Seq {
  int ctx, n;
};

struct Case {
  std::string name;
  std::vector<Seq> seqs;
  bool decode = true;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

float bf16_bits_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Median microseconds per call of fn(copy) over batches of `reps` calls.
double time_us(const std::function<void(int)>& fn, int copies, int reps, int batches) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 2; ++i) fn(i % copies);  // warm-up
  std::vector<double> per_call;
  int copy = 0;
  for (int b = 0; b < batches; ++b) {
    spin<<<1, 1>>>(10'000'000);  // ~5 ms: the host queues the batch meanwhile
    CK(cudaEventRecord(e0));
    for (int r = 0; r < reps; ++r) fn(copy++ % copies);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    per_call.push_back(1000.0 * ms / reps);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return median(per_call);
}

struct Row {
  std::string name;
  double mbytes, gflop, floor_us, v1_us, v4_us, v2_us, var_us;
  std::string var_name;
  double err;
  long nan;
};

// filter: run only the cases whose name contains it; profile: check each once, time nothing
// (for ncu).
int run(double peak_tflops, const std::string& filter, bool profile) {
  const char* lab_kv = std::getenv("LAB_KV");
  const bool kv_fp8 = lab_kv != nullptr && std::string(lab_kv) == "fp8";
  int device = 0;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  CK(cudaDriverGetVersion(&driver));
  CK(cudaRuntimeGetVersion(&runtime));
  std::printf("device %s, %d SMs, L2 %d MB, driver %d, runtime %d\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, driver, runtime);

  // Read bandwidth: 4 GiB streamed once per call.
  double read_gbs = 3000.0;
  if (!profile) {
    const int64_t bytes = int64_t{4} << 30;
    uint4 *buf = nullptr, *sink = nullptr;
    CK(cudaMalloc(&buf, bytes));
    CK(cudaMalloc(&sink, 64));
    CK(cudaMemset(buf, 1, bytes));
    const double us = time_us(
        [&](int) { read_bytes<<<prop.multiProcessorCount * 8, 512>>>(buf, bytes / 16, sink); }, 1,
        5, 3);
    read_gbs = bytes / us / 1e3;
    // Device-to-device copy, counting bytes read and written.
    const double copy_us = time_us(
        [&](int) {
          CK(cudaMemcpyAsync(reinterpret_cast<char*>(buf) + bytes / 2, buf, bytes / 2,
                             cudaMemcpyDeviceToDevice));
        },
        1, 5, 3);
    std::printf("read bandwidth %.0f GB/s, device copy %.0f GB/s (read + write)\n", read_gbs,
                bytes / copy_us / 1e3);
    CK(cudaFree(buf));
    CK(cudaFree(sink));
  }

  std::vector<Case> cases;
  for (const int ctx : {130, 200, 256, 300, 400}) {  // short contexts: split-KV or not
    cases.push_back({"decode b1 ctx" + std::to_string(ctx), {{ctx, 1}}, true});
  }
  for (const int batch : {1, 32, 256}) {
    for (const int ctx : {512, 2048, 8192}) {
      cases.push_back({"decode b" + std::to_string(batch) + " ctx" + std::to_string(ctx),
                       std::vector<Seq>(batch, Seq{ctx, 1}), true});
    }
  }
  // Offline 128/128's decode steps: 1,024 sequences of 128-256 tokens.
  for (const int ctx : {160, 240}) {
    cases.push_back(
        {"decode b1024 ctx" + std::to_string(ctx), std::vector<Seq>(1024, Seq{ctx, 1}), true});
  }
  cases.push_back({"prefill 512", {{512, 512}}, false});
  cases.push_back({"prefill 2048", {{2048, 2048}}, false});
  cases.push_back({"prefill 8192", {{8192, 8192}}, false});
  {
    Case mixed{"mixed 512@2048+63dec", {{2048, 512}}, false};
    for (int i = 0; i < 63; ++i) mixed.seqs.push_back({2048, 1});
    cases.push_back(mixed);
    // A step of offline 2048/128 at 256 running sequences: two whole prompts beside 256
    // decodes at ~2,100 tokens of context.
    Case step{"mixed 2x2048+256dec", {{2048, 2048}, {2048, 2048}}, false};
    for (int i = 0; i < 256; ++i) step.seqs.push_back({2112, 1});
    cases.push_back(step);
  }

  std::mt19937 rng(7);
  std::vector<Row> rows;
  for (const Case& c : cases) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    const int num_seqs = static_cast<int>(c.seqs.size());
    int max_ctx = 0, tokens = 0;
    double keys = 0, ctx_tokens = 0;
    std::vector<int32_t> qs = {0}, ctxs;
    for (const Seq& s : c.seqs) {
      max_ctx = std::max(max_ctx, s.ctx);
      tokens += s.n;
      qs.push_back(tokens);
      ctxs.push_back(s.ctx);
      ctx_tokens += s.ctx;
      for (int i = 0; i < s.n; ++i) keys += s.ctx - s.n + i + 1;
    }
    const int blocks_per_seq = (max_ctx + kBlockSize - 1) / kBlockSize;
    const int64_t need = static_cast<int64_t>(num_seqs) * blocks_per_seq;
    // LAB_KV=fp8: an e4m3 cache with a scale per (token, kv head), as --kv-cache-dtype fp8.
    const int eb = kv_fp8 ? 1 : 2;
    const int64_t block_bytes = int64_t{kBlockSize} * kKvHeads * (kHeadDim * eb + (kv_fp8 ? 4 : 0));
    const double kv_bytes = ctx_tokens * kKvHeads * (kHeadDim * 2.0 * eb + (kv_fp8 ? 8 : 0));
    const double io_bytes = 2.0 * tokens * kHeads * kHeadDim * 2.0;
    const int copies = static_cast<int>(
        std::clamp<int64_t>((int64_t{256} << 20) / (need * block_bytes * 2) + 1, 1, 128));
    const int64_t num_blocks = need * copies;
    const int64_t cache_elems = num_blocks * kBlockSize * kKvHeads * kHeadDim;

    void *k = nullptr, *v = nullptr;
    float *k_scales = nullptr, *v_scales = nullptr;
    bf16 *q = nullptr, *out_v1 = nullptr, *out_v2 = nullptr;
    int32_t *d_tables = nullptr, *d_qs = nullptr, *d_ctx = nullptr;
    const int64_t q_elems = int64_t{tokens} * kHeads * kHeadDim;
    CK(cudaMalloc(&k, cache_elems * eb));
    CK(cudaMalloc(&v, cache_elems * eb));
    CK(cudaMalloc(&q, q_elems * 2));
    CK(cudaMalloc(&out_v1, q_elems * 2));
    CK(cudaMalloc(&out_v2, q_elems * 2));
    if (kv_fp8) {
      const int64_t scales = num_blocks * kBlockSize * kKvHeads;
      CK(cudaMalloc(&k_scales, scales * 4));
      CK(cudaMalloc(&v_scales, scales * 4));
      fill_random<<<1024, 256>>>(static_cast<uint8_t*>(k), cache_elems, 1, 448.0f);
      fill_random<<<1024, 256>>>(static_cast<uint8_t*>(v), cache_elems, 2, 448.0f);
      fill_const<<<256, 256>>>(k_scales, scales, 1.0f / 448.0f);
      fill_const<<<256, 256>>>(v_scales, scales, 1.0f / 448.0f);
    } else {
      fill_random<<<1024, 256>>>(static_cast<bf16*>(k), cache_elems, 1, 1.0f);
      fill_random<<<1024, 256>>>(static_cast<bf16*>(v), cache_elems, 2, 1.0f);
    }
    fill_random<<<1024, 256>>>(q, q_elems, 3, 2.0f);
    CK(cudaMemset(out_v1, 0xff, q_elems * 2));
    CK(cudaMemset(out_v2, 0xff, q_elems * 2));
    // Copy i uses blocks [i * need, (i + 1) * need), shuffled.
    std::vector<int32_t> tables(static_cast<size_t>(need * copies));
    for (int i = 0; i < copies; ++i) {
      auto* t = tables.data() + i * need;
      std::iota(t, t + need, static_cast<int32_t>(i * need));
      std::shuffle(t, t + need, rng);
    }
    CK(cudaMalloc(&d_tables, tables.size() * 4));
    CK(cudaMalloc(&d_qs, qs.size() * 4));
    CK(cudaMalloc(&d_ctx, ctxs.size() * 4));
    CK(cudaMemcpy(d_tables, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_qs, qs.data(), qs.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_ctx, ctxs.data(), ctxs.size() * 4, cudaMemcpyHostToDevice));

    auto params = [&](int copy, bf16* out) {
      PagedAttentionParams p;
      p.q = q;
      p.out = out;
      p.kv.k = k;
      p.kv.v = v;
      if (kv_fp8) {
        p.kv.dtype = DType::kF8E4M3;
        p.kv.k_scales = k_scales;
        p.kv.v_scales = v_scales;
      }
      p.kv.block_tables = d_tables + copy * need;
      p.kv.num_blocks = num_blocks;
      p.kv.max_blocks_per_seq = blocks_per_seq;
      p.kv.block_size = kBlockSize;
      p.kv.num_kv_heads = kKvHeads;
      p.kv.head_dim = kHeadDim;
      p.query_start = d_qs;
      p.context_lens = d_ctx;
      p.num_tokens = tokens;
      p.num_seqs = num_seqs;
      p.num_heads = kHeads;
      p.max_context_len = max_ctx;
      p.sliding_window = 0;
      p.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
      p.dtype = DType::kBF16;
      return p;
    };

    // Correctness: the tile path against version 1 on copy 0.
    attention::launch_simple(params(0, out_v1), nullptr);
    paged_attention_cuda(params(0, out_v2), nullptr);
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> h1(q_elems), h2(q_elems);
    CK(cudaMemcpy(h1.data(), out_v1, q_elems * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2.data(), out_v2, q_elems * 2, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    long nan = 0;
    for (int64_t i = 0; i < q_elems; ++i) {
      const float a = bf16_bits_to_float(h1[i]), b = bf16_bits_to_float(h2[i]);
      if (!std::isfinite(b) || !std::isfinite(a)) {
        ++nan;
        continue;
      }
      num += (a - b) * (a - b);
      den += a * a;
    }
    const double err = std::sqrt(num / std::max(den, 1e-30));

    if (profile) {
      std::printf("%-22s err %.2e nan %ld (profile run: no timing)\n", c.name.c_str(), err, nan);
      for (void* ptr :
           {k, v, static_cast<void*>(k_scales), static_cast<void*>(v_scales), static_cast<void*>(q),
            static_cast<void*>(out_v1), static_cast<void*>(out_v2), static_cast<void*>(d_tables),
            static_cast<void*>(d_qs), static_cast<void*>(d_ctx)}) {
        CK(cudaFree(ptr));
      }
      continue;
    }
    const double flops = 4.0 * kHeadDim * kHeads * keys;
    const double floor_us =
        std::max((kv_bytes + io_bytes) / read_gbs / 1e3, flops / (peak_tflops * 1e6));
    auto reps_for = [&](double est_us) {
      return static_cast<int>(std::clamp(3000.0 / std::max(est_us, 1.0), 3.0, 100.0));
    };
    auto v2 = [&](int copy) { paged_attention_cuda(params(copy, out_v2), nullptr); };
    const double v2_once = time_us(v2, copies, 1, 1);
    const double v2_us = time_us(v2, copies, reps_for(v2_once), 5);
    auto v1 = [&](int copy) { attention::launch_simple(params(copy, out_v1), nullptr); };
    const double v1_once = time_us(v1, copies, 1, 1);
    const double v1_us = time_us(v1, copies, reps_for(v1_once), 3);
    // Version 4 (the previous production path), timed like the current one.
    auto v4 = [&](int copy) {
      v4::launch_tiles<128, 0, 2, 2, true>(params(copy, out_v2), nullptr);
    };
    // (version 4 reads bf16 caches only)
    const double v4_us = kv_fp8 ? 0.0 : time_us(v4, copies, reps_for(time_us(v4, copies, 1, 1)), 5);
    // Lab variants: version 4 with the current grid order (kv head fastest); prefill tiles of
    // 64 or 128 rows.
    std::vector<std::pair<std::string, std::function<void(int)>>> variants;
    if (!c.decode && !kv_fp8) {
      variants.push_back({"v4+kh-fastest", [&](int copy) {
                            v4::launch_tiles<128, 0, 2, 2, true>(params(copy, out_v2), nullptr,
                                                                 true);
                          }});
      variants.push_back({"64 rows", [&](int copy) {
                            attention::launch_tiles<128, 64, 2, 2, true>(params(copy, out_v2),
                                                                         nullptr);
                          }});
      variants.push_back({"128 rows", [&](int copy) {
                            attention::launch_tiles<128, 128, 2, 2, true>(params(copy, out_v2),
                                                                          nullptr);
                          }});
    }
    if (c.decode && kv_fp8) {
      // One K/V stage more than paged_attention_cuda's (which takes 2, or 3 for grids resident
      // at once).
      variants.push_back({"stage more", [&](int copy) {
                            attention::launch_tiles<128, 0, 2, 3, true, true>(params(copy, out_v2),
                                                                              nullptr);
                          }});
    }
    if (c.decode) {
      // Decode tiles of 2 warps (32 keys a stage) and twice the CTAs per SM, 2 or 3 stages.
      const auto two_warps = [&]<int kStages>(int copy) {
        if (kv_fp8) {
          attention::launch_tiles<128, 0, 2, kStages, true, true, 2>(params(copy, out_v2), nullptr);
        } else {
          attention::launch_tiles<128, 0, 2, kStages, true, false, 2>(params(copy, out_v2),
                                                                      nullptr);
        }
      };
      // (two_warps is captured by value: it ends with this block, the variants outlive it)
      variants.push_back(
          {"2 warps", [two_warps](int copy) { two_warps.template operator()<2>(copy); }});
      variants.push_back(
          {"2 warps 3 stages", [two_warps](int copy) { two_warps.template operator()<3>(copy); }});
    }
    if (c.decode && kv_fp8) {
      // Persistent decode CTAs whose cp.async ring runs on across items (persistent_decode.cuh).
      variants.push_back({"persistent 2w3s", [&](int copy) {
                            launch_persistent_decode<128, 2, 3>(params(copy, out_v2), nullptr);
                          }});
      variants.push_back({"persistent 2w4s", [&](int copy) {
                            launch_persistent_decode<128, 2, 4>(params(copy, out_v2), nullptr);
                          }});
      variants.push_back({"persistent 4w2s", [&](int copy) {
                            launch_persistent_decode<128, 4, 2>(params(copy, out_v2), nullptr);
                          }});
    }
    std::string var_name;
    double var_us = 0.0;
    for (const auto& [name, fn] : variants) {
      // Each variant's output is checked against version 1 too.
      CK(cudaMemset(out_v2, 0xff, q_elems * 2));
      fn(0);
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(h2.data(), out_v2, q_elems * 2, cudaMemcpyDeviceToHost));
      double vn = 0;
      long vnan = 0;
      for (int64_t i = 0; i < q_elems; ++i) {
        const float a = bf16_bits_to_float(h1[i]), b = bf16_bits_to_float(h2[i]);
        if (!std::isfinite(b)) {
          ++vnan;
          continue;
        }
        vn += (a - b) * (a - b);
      }
      const double once = time_us(fn, copies, 1, 1);
      const double us = time_us(fn, copies, reps_for(once), 5);
      char buf[96];
      std::snprintf(buf, sizeof(buf), "%s%s %.1f us (err %.1e%s)", var_name.empty() ? "" : "; ",
                    name.c_str(), us, std::sqrt(vn / std::max(den, 1e-30)), vnan ? " NAN" : "");
      var_name += buf;
      var_us = var_us == 0.0 ? us : std::min(var_us, us);
    }
    CK(cudaDeviceSynchronize());

    rows.push_back({c.name, (kv_bytes + io_bytes) / 1e6, flops / 1e9, floor_us, v1_us, v4_us, v2_us,
                    var_us, var_name, err, nan});
    std::printf("%-22s copies %3d  err %.2e nan %ld  v1 %9.1f us  v4 %8.1f us  tile %8.1f us  %s\n",
                c.name.c_str(), copies, err, nan, v1_us, v4_us, v2_us, var_name.c_str());
    std::fflush(stdout);
    for (void* ptr :
         {k, v, static_cast<void*>(k_scales), static_cast<void*>(v_scales), static_cast<void*>(q),
          static_cast<void*>(out_v1), static_cast<void*>(out_v2), static_cast<void*>(d_tables),
          static_cast<void*>(d_qs), static_cast<void*>(d_ctx)}) {
      CK(cudaFree(ptr));
    }
  }

  std::printf(
      "\n== paged attention, H=32 KH=8 D=128 pages of 16, %s cache (%s; read %.0f GB/s, matrix "
      "%.0f TFLOP/s) ==\n",
      kv_fp8 ? "e4m3" : "bf16", prop.name, read_gbs, peak_tflops);
  std::printf("%-22s %8s %7s %8s %9s %8s %8s %6s %7s %7s %6s %8s\n", "case", "MB", "GFLOP",
              "floor us", "v1 us", "v4 us", "tile us", "v4/now", "GB/s", "TF/s", "floor", "err");
  for (const Row& r : rows) {
    std::printf("%-22s %8.1f %7.2f %8.1f %9.1f %8.1f %8.1f %6.2f %7.0f %7.1f %5.0f%% %8.1e%s\n",
                r.name.c_str(), r.mbytes, r.gflop, r.floor_us, r.v1_us, r.v4_us, r.v2_us,
                r.v4_us / r.v2_us, r.mbytes * 1e6 / r.v2_us / 1e3, r.gflop * 1e9 / r.v2_us / 1e6,
                100.0 * r.floor_us / r.v2_us, r.err, r.nan ? " NAN" : "");
  }
  std::printf("variants (lab):\n");
  for (const Row& r : rows) std::printf("  %-22s %s\n", r.name.c_str(), r.var_name.c_str());
  return 0;
}

}  // namespace
}  // namespace inflight::lab

// attention_bench [matrix TFLOP/s] [case filter] [profile]
int main(int argc, char** argv) {
  const double peak = argc > 1 ? std::atof(argv[1]) : 0.0;
  const std::string filter = argc > 2 ? argv[2] : "";
  const bool profile = argc > 3 && std::string(argv[3]) == "profile";
  try {
    return inflight::lab::run(peak > 0 ? peak : 790.0, filter, profile);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench failed: %s\n", e.what());
    return 1;
  }
}
