// The Qwen3 and mixture-of-experts ops on CUDA against the CPU reference: qk_norm, the router's
// top-k (ids exact: both rank the same f32 logits by the same rule), the experts over awkward
// shapes with experts that get no tokens and groups longer than one tile, on both paths (per-pair
// GEMVs for small batches; grouped GEMMs over tiles, always in batch-invariant mode, where a
// token's result must not depend on the batch); and both ops captured in a CUDA graph and
// replayed on new inputs (no host sync inside).
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "core/fp8.h"
#include "cuda_test_util.h"
#include "model/linear_loader.h"
#include "ops/ops_cuda.cuh"
#include "ops/quantize_fp8.h"

namespace inflight::test {
namespace {

// A host i32 tensor on the device, bit for bit.
Tensor upload_i32(Backend& gpu, const Tensor& host) {
  const Tensor t = gpu.alloc(host.shape(), DType::kI32);
  gpu.synchronize();
  EXPECT_EQ(cudaMemcpy(t.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  return t;
}

Tensor download_raw(Backend& gpu, const Tensor& t) {
  const Tensor host = Tensor::empty(t.shape(), t.dtype());
  gpu.download(t, host);
  gpu.synchronize();
  return host;
}

// fp8_experts: with rows for the quantized activations of FP8 experts (their W8A8 path).
MoeWorkspace workspace(Backend& b, int64_t tokens, int64_t k, int64_t experts, int64_t hidden,
                       int64_t inter, bool fp8_experts = false) {
  MoeWorkspace ws;
  for (const MoeWorkspaceBuffer& buf :
       moe_workspace_buffers(tokens, k, experts, hidden, inter, b.compute_dtype(), fp8_experts)) {
    ws.*buf.member = b.alloc(buf.shape, buf.dtype);
  }
  return ws;
}

// The experts' stacked weight as the model keeps it (runtime/linear.h), unquantized.
Linear stacked(const Tensor& w) {
  Linear l;
  l.weight = w;
  return l;
}

// The CUDA backend in batch-invariant mode: the experts always take the grouped path.
Backend& invariant_backend() {
  static std::unique_ptr<Backend> backend = make_cuda_backend(0, {.batch_invariant = true});
  return *backend;
}

TEST(CudaQwen3Test, QkNorm) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(61);
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {6, 2, 8}, {32, 8, 128}, {7, 1, 62}, {4, 4, 256}, {2, 1, 512}};
  for (const int64_t tokens : {1, 3, 7, 91}) {
    for (const auto& [heads, kv_heads, dim] : shapes) {
      const Tensor qkv = random_host({tokens, (heads + 2 * kv_heads) * dim}, rng, -3.0f, 3.0f);
      const Tensor qw = random_host({dim}, rng, 0.5f, 1.5f), kw = random_host({dim}, rng);
      const Tensor qkv_gpu = to_backend(gpu, qkv), qkv_cpu = to_backend(cpu, qkv);
      gpu.qk_norm(qkv_gpu, heads, kv_heads, to_backend(gpu, qw), to_backend(gpu, kw), 1e-6f);
      cpu.qk_norm(qkv_cpu, heads, kv_heads, to_backend(cpu, qw), to_backend(cpu, kw), 1e-6f);
      expect_close("qk_norm", fmt::format("T={} H={} KH={} D={}", tokens, heads, kv_heads, dim),
                   to_host(gpu, qkv_gpu), qkv_cpu);
    }
  }
}

struct Routed {
  Tensor ids;      // host i32 [T, k]
  Tensor weights;  // host f32 [T, k]
};

// Routes the same f32 logits on both backends: ids must be equal, weights close.
Routed route_both(const Tensor& logits, int32_t k, bool renormalize, const std::string& what) {
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  const int64_t tokens = logits.size(0);
  const Tensor ids_gpu = gpu.alloc({tokens, k}, DType::kI32);
  const Tensor w_gpu = gpu.alloc({tokens, k}, DType::kF32);
  poison(ids_gpu);
  poison(w_gpu);
  gpu.moe_route(gpu.upload(logits, DType::kF32), k, renormalize, ids_gpu, w_gpu);
  Routed cpu_r{Tensor::empty({tokens, k}, DType::kI32), Tensor::empty({tokens, k}, DType::kF32)};
  cpu.moe_route(logits, k, renormalize, cpu_r.ids, cpu_r.weights);
  const Tensor got_ids = download_raw(gpu, ids_gpu);
  EXPECT_EQ(std::memcmp(got_ids.raw(), cpu_r.ids.raw(), cpu_r.ids.nbytes()), 0)
      << what << ": expert ids differ";
  expect_close("moe_route.weights", what, to_host(gpu, w_gpu), cpu_r.weights, 1e-5);
  return cpu_r;
}

TEST(CudaMoeTest, RouteMatchesCpuIncludingTies) {
  INFLIGHT_REQUIRE_CUDA();
  std::mt19937 rng(62);
  for (const int64_t tokens : {1, 3, 7, 91}) {
    for (const int64_t experts : {1, 5, 8, 60, 128, 1024}) {
      for (const int32_t k : {1, 2, 8, 32}) {
        if (k > experts) continue;
        for (const bool renormalize : {true, false}) {
          const std::string what =
              fmt::format("T={} E={} k={} renorm={}", tokens, experts, k, renormalize);
          route_both(random_host({tokens, experts}, rng, -4.0f, 4.0f), k, renormalize, what);
          // Integer logits: ties at every rank.
          Tensor ties = random_host({tokens, experts}, rng, 0.0f, 3.0f);
          for (int64_t i = 0; i < ties.numel(); ++i) {
            ties.data<float>()[i] = std::floor(ties.data<float>()[i]);
          }
          route_both(ties, k, renormalize, what + " ties");
        }
      }
    }
  }
}

struct ExpertCase {
  int64_t experts, k, hidden, inter;
};

TEST(CudaMoeTest, ExpertsMatchCpu) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(63);
  // Mixtral-like (8 of 2), Qwen3-MoE-like (128 of 8), primes and sizes off the tiles (32 x 128
  // x 32 on tensor cores where K is a multiple of 8, 32 x 64 x 32 on CUDA cores otherwise: 33
  // and 71, 65 take the latter); 300 tokens put more than one tile into an expert's group.
  for (const ExpertCase c :
       {ExpertCase{5, 2, 48, 32}, ExpertCase{8, 2, 256, 384}, ExpertCase{7, 3, 33, 71},
        ExpertCase{128, 8, 128, 96}, ExpertCase{1, 1, 64, 65}}) {
    for (const int64_t tokens : {1, 3, 7, 91, 300}) {
      const std::string what =
          fmt::format("E={} k={} hidden={} I={} T={}", c.experts, c.k, c.hidden, c.inter, tokens);
      const Tensor x = random_host({tokens, c.hidden}, rng, -2.0f, 2.0f);
      const float a = 1.0f / std::sqrt(static_cast<float>(c.hidden));
      const float b = 1.0f / std::sqrt(static_cast<float>(c.inter));
      const Tensor gate_up = random_host({c.experts, 2 * c.inter, c.hidden}, rng, -a, a);
      const Tensor down = random_host({c.experts, c.hidden, c.inter}, rng, -b, b);
      // Odd experts lose every race where there are enough even ones: experts without tokens.
      Tensor logits = random_host({tokens, c.experts}, rng, -3.0f, 3.0f);
      if (c.experts >= 2 * c.k) {
        for (int64_t i = 0; i < logits.numel(); ++i) {
          if (i % c.experts % 2 == 1) logits.data<float>()[i] -= 100.0f;
        }
      }
      const Routed r = route_both(logits, static_cast<int32_t>(c.k), true, what);

      const MoeWorkspace ws_cpu = workspace(cpu, tokens, c.k, c.experts, c.hidden, c.inter);
      const Tensor out_cpu = cpu.alloc({tokens, c.hidden}, DType::kF32);
      cpu.moe_experts(x, r.ids, r.weights, stacked(gate_up), stacked(down), ws_cpu, out_cpu);

      for (Backend* b : {&gpu, &invariant_backend()}) {
        const bool invariant = b != &gpu;
        const std::string label = what + (invariant ? " batch-invariant" : "");
        const MoeWorkspace ws = workspace(*b, tokens, c.k, c.experts, c.hidden, c.inter);
        b->synchronize();  // poison() writes on the legacy stream
        for (const Tensor* t : {&ws.gate_up, &ws.act, &ws.expert_out}) poison(*t);
        const Tensor out_gpu = b->alloc({tokens, c.hidden}, DType::kBF16);
        poison(out_gpu);
        const Tensor ids_gpu = upload_i32(*b, r.ids);
        const Tensor w_gpu = b->upload(r.weights, DType::kF32);
        const Tensor x_gpu = to_backend(*b, x);
        const Tensor gu_gpu = to_backend(*b, gate_up), down_gpu = to_backend(*b, down);
        b->moe_experts(x_gpu, ids_gpu, w_gpu, stacked(gu_gpu), stacked(down_gpu), ws, out_gpu);
        const Tensor got = to_host(*b, out_gpu);
        expect_close(invariant ? "moe_experts.grouped" : "moe_experts", label, got, out_cpu);
        if (!invariant) continue;
        // Token by token: bit for bit what the whole batch gave.
        for (const int64_t t : {int64_t{0}, tokens / 2, tokens - 1}) {
          const Tensor one = b->alloc({1, c.hidden}, DType::kBF16);
          b->moe_experts(x_gpu.rows(t, t + 1), ids_gpu.rows(t, t + 1), w_gpu.rows(t, t + 1),
                         stacked(gu_gpu), stacked(down_gpu), ws, one);
          const Tensor one_host = to_host(*b, one);
          EXPECT_EQ(std::memcmp(one_host.raw(), got.data<float>() + t * c.hidden,
                                c.hidden * sizeof(float)),
                    0)
              << label << ": token " << t << " alone differs from the batch";
        }
      }
    }
  }
}

// An e4m3 expert stack (made by the loader's online quantization from the bf16 weights of
// w [E, n, k] on the device) and its dequantized weights, e4m3 value * scale in f32 on the host
// (from the downloaded bytes and scales) and rounded once to bf16 on the device.
struct Fp8Stack {
  Linear linear;
  Tensor dequantized;  // device bf16
  Tensor host;         // host f32
};

Fp8Stack quantize_stack(Backend& gpu, const Tensor& w_host, const OnlineFp8Scheme& scheme) {
  const int64_t experts = w_host.size(0), n = w_host.size(1), k = w_host.size(2);
  Fp8Stack out;
  out.linear =
      quantize_linear_online(gpu, to_backend(gpu, w_host.reshape({experts * n, k})), scheme);
  const Tensor q = download_raw(gpu, out.linear.weight);
  const Tensor s = download_raw(gpu, out.linear.scale);
  const Linear& l = out.linear;
  Tensor deq = Tensor::empty({experts, n, k}, DType::kF32);
  for (int64_t r = 0; r < experts * n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      const int64_t si = l.block_rows > 0 ? r / l.block_rows * s.size(1) + c / l.block_cols
                         : s.numel() == 1 ? 0
                                          : r;
      deq.data<float>()[r * k + c] =
          e4m3_to_f32(static_cast<const uint8_t*>(q.raw())[r * k + c]) * s.data<float>()[si];
    }
  }
  out.linear.weight = out.linear.weight.reshape({experts, n, k});
  out.dequantized = to_backend(gpu, deq);
  out.host = deq;
  return out;
}

// Weight-only FP8 experts (a workspace without rows for quantized activations) give bit for bit
// what their dequantized bf16 weights give, on every path: the per-pair GEMVs, the grouped GEMM
// on tensor cores and on CUDA cores (down's k = 70, off the 8-value chunks), in every scale
// layout the loader makes (per row, per tensor, blocks).
TEST(CudaMoeTest, Fp8ExpertsAreTheirDequantizedWeights) {
  INFLIGHT_REQUIRE_CUDA();
  if (!cuda_backend().supports_fp8()) GTEST_SKIP() << "the GPU has no FP8";
  Backend& gpu = cuda_backend();
  std::mt19937 rng(65);
  using Scales = Quantization::WeightScales;
  for (const ExpertCase c :
       {ExpertCase{8, 2, 256, 128}, ExpertCase{16, 4, 128, 70}, ExpertCase{4, 1, 64, 32}}) {
    const float a = 1.0f / std::sqrt(static_cast<float>(c.hidden));
    const float b = 1.0f / std::sqrt(static_cast<float>(c.inter));
    const Tensor gate_up = random_host({c.experts, 2 * c.inter, c.hidden}, rng, -a, a);
    const Tensor down = random_host({c.experts, c.hidden, c.inter}, rng, -b, b);
    for (const OnlineFp8Scheme scheme :
         {OnlineFp8Scheme{Scales::kChannel}, OnlineFp8Scheme{Scales::kTensor},
          OnlineFp8Scheme{Scales::kBlock, 16, 32}}) {
      const Fp8Stack gu = quantize_stack(gpu, gate_up, scheme);
      const Fp8Stack dn = quantize_stack(gpu, down, scheme);
      for (const int64_t tokens : {1, 3, 91, 300}) {
        const std::string what =
            fmt::format("E={} k={} hidden={} I={} T={} scales {}", c.experts, c.k, c.hidden,
                        c.inter, tokens, static_cast<int>(scheme.weights));
        const Tensor x = random_host({tokens, c.hidden}, rng, -2.0f, 2.0f);
        const Routed r = route_both(random_host({tokens, c.experts}, rng, -3.0f, 3.0f),
                                    static_cast<int32_t>(c.k), true, what);
        for (Backend* be : {&gpu, &invariant_backend()}) {
          const MoeWorkspace ws = workspace(*be, tokens, c.k, c.experts, c.hidden, c.inter);
          const Tensor ids_gpu = upload_i32(*be, r.ids);
          const Tensor w_gpu = be->upload(r.weights, DType::kF32);
          const Tensor x_gpu = to_backend(*be, x);
          const Tensor got = be->alloc({tokens, c.hidden}, DType::kBF16);
          const Tensor want = be->alloc({tokens, c.hidden}, DType::kBF16);
          be->moe_experts(x_gpu, ids_gpu, w_gpu, gu.linear, dn.linear, ws, got);
          be->moe_experts(x_gpu, ids_gpu, w_gpu, stacked(gu.dequantized), stacked(dn.dequantized),
                          ws, want);
          const Tensor got_host = download_raw(*be, got), want_host = download_raw(*be, want);
          EXPECT_EQ(std::memcmp(got_host.raw(), want_host.raw(), got_host.nbytes()), 0)
              << what << (be == &gpu ? "" : " batch-invariant");
        }
      }
    }
  }
}

float round_bf16(float v) {
  return bf16_to_f32(f32_to_bf16(v));
}

// A row quantized by the CPU reference of the kernels' rule (ops/quantize_fp8.h, dynamic per
// row): the e4m3 values (as f32) and the row's scale.
float quantize_row(const float* v, int64_t n, std::vector<float>& q) {
  std::vector<uint8_t> values(static_cast<size_t>(n));
  float scale = 0.0f;
  QuantizeFp8Params p;
  p.x = v;
  p.values = values.data();
  p.scales = &scale;
  p.m = 1;
  p.k = n;
  p.dtype = DType::kF32;
  quantize_fp8_cpu(p);
  q.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) q[i] = e4m3_to_f32(values[i]);
  return scale;
}

// W8A8 experts on the host: x (bf16 values) quantized per token, each pair's gate/up product
// sx sum_k xq[k] w[n, k] (w the dequantized f32 weight, e4m3 value * scale) rounded to bf16
// (into gate_up_rows [T k, 2 I], pair order), SwiGLU in f32 rounded to bf16, quantized per
// pair, the down product likewise, and the weighted sum over the token's choices in order,
// rounded to bf16 (out). Sums in double.
struct W8a8Reference {
  Tensor gate_up_rows;
  Tensor out;
};

W8a8Reference w8a8_experts_reference(const Tensor& x, const Routed& r, const Tensor& gate_up,
                                     const Tensor& down) {
  const int64_t tokens = x.size(0), hidden = x.size(1), k = r.ids.size(1);
  const int64_t inter = gate_up.size(1) / 2;
  W8a8Reference ref{Tensor::empty({tokens * k, 2 * inter}, DType::kF32),
                    Tensor::empty({tokens, hidden}, DType::kF32)};
  std::vector<float> xq, aq, act(inter), sum(hidden);
  const auto dot = [](const std::vector<float>& q, const float* w, int64_t n) {
    double acc = 0.0;
    for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(q[i]) * w[i];
    return acc;
  };
  for (int64_t t = 0; t < tokens; ++t) {
    const float sx = quantize_row(x.data<float>() + t * hidden, hidden, xq);
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = r.ids.data<int32_t>()[t * k + j];
      const float* gu = gate_up.data<float>() + e * 2 * inter * hidden;
      float* h = ref.gate_up_rows.data<float>() + (t * k + j) * 2 * inter;
      for (int64_t n = 0; n < 2 * inter; ++n) {
        h[n] = round_bf16(static_cast<float>(sx * dot(xq, gu + n * hidden, hidden)));
      }
      for (int64_t i = 0; i < inter; ++i) {
        act[i] = round_bf16(h[i] / (1.0f + std::exp(-h[i])) * h[inter + i]);
      }
      const float sa = quantize_row(act.data(), inter, aq);
      const float* dn = down.data<float>() + e * hidden * inter;
      for (int64_t n = 0; n < hidden; ++n) {
        const float o = round_bf16(static_cast<float>(sa * dot(aq, dn + n * inter, inter)));
        sum[n] += r.weights.data<float>()[t * k + j] * o;
      }
    }
    for (int64_t n = 0; n < hidden; ++n) {
      ref.out.data<float>()[t * hidden + n] = round_bf16(sum[n]);
    }
  }
  return ref;
}

// FP8 experts with rows for quantized activations take FP8 tensor cores on the grouped path
// (ops/moe_wgmma_gemm.cuh, sm_90): the result is the host's W8A8 emulation in every scale layout
// the kernel takes. The tensor cores add the products of a 128-column block with less than f32
// precision, which turns some bf16 roundings of gate/up the other way (checked against the
// emulation to 1e-2: one bf16 rounding of the largest value); the e4m3 quantization of act
// amplifies those (the output to 4e-2, where a wrong tile, swizzle or scale gives errors of order
// 1). Covered: shapes off the 128 x 128 x 128 tiles (n = 160, 208, 224; k = 80, 112, 208), experts
// without tokens, groups over several tiles; and a token alone gives bit for bit what it gave in
// its batch.
TEST(CudaMoeTest, W8a8ExpertsMatchTheirEmulation) {
  INFLIGHT_REQUIRE_CUDA();
  if (!cuda_backend().supports_fp8()) GTEST_SKIP() << "the GPU has no FP8";
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major != 9) GTEST_SKIP() << "FP8 experts take wgmma on sm_90 only";
  Backend& gpu = cuda_backend();
  std::mt19937 rng(66);
  using Scales = Quantization::WeightScales;
  struct Case {
    ExpertCase shape;
    OnlineFp8Scheme scheme;
    int64_t many_tokens = 0;  // one more batch: more (tile, column block) items than CTAs
  };
  for (const Case& c :
       {Case{{8, 2, 256, 128}, {Scales::kChannel}}, Case{{8, 2, 256, 128}, {Scales::kTensor}},
        Case{{8, 2, 256, 128}, {Scales::kBlock, 128, 128}},
        Case{{16, 4, 208, 80}, {Scales::kChannel}}, Case{{4, 1, 64, 112}, {Scales::kTensor}},
        Case{{8, 2, 256, 1024}, {Scales::kChannel}, 2000},
        Case{{8, 2, 256, 1024}, {Scales::kBlock, 128, 128}, 2000}}) {
    const ExpertCase& e = c.shape;
    const float a = 1.0f / std::sqrt(static_cast<float>(e.hidden));
    const float b = 1.0f / std::sqrt(static_cast<float>(e.inter));
    const Fp8Stack gu =
        quantize_stack(gpu, random_host({e.experts, 2 * e.inter, e.hidden}, rng, -a, a), c.scheme);
    const Fp8Stack dn =
        quantize_stack(gpu, random_host({e.experts, e.hidden, e.inter}, rng, -b, b), c.scheme);
    std::vector<int64_t> batches = {1, 3, 91, 300};
    if (c.many_tokens > 0) batches.push_back(c.many_tokens);
    for (const int64_t tokens : batches) {
      const std::string what =
          fmt::format("E={} k={} hidden={} I={} T={} scales {}", e.experts, e.k, e.hidden, e.inter,
                      tokens, static_cast<int>(c.scheme.weights));
      Tensor logits = random_host({tokens, e.experts}, rng, -3.0f, 3.0f);
      for (int64_t i = 0; i < logits.numel(); ++i) {  // expert 1 gets no tokens
        if (i % e.experts == 1) logits.data<float>()[i] -= 100.0f;
      }
      const Routed r = route_both(logits, static_cast<int32_t>(e.k), true, what);
      for (Backend* be : {&gpu, &invariant_backend()}) {
        const bool invariant = be != &gpu;
        if (!invariant && tokens * e.k <= e.experts) continue;  // the weight-only GEMVs
        const std::string label = what + (invariant ? " batch-invariant" : "");
        const MoeWorkspace ws = workspace(*be, tokens, e.k, e.experts, e.hidden, e.inter, true);
        const Tensor x_gpu = to_backend(*be, random_host({tokens, e.hidden}, rng, -2.0f, 2.0f));
        const Tensor ids_gpu = upload_i32(*be, r.ids);
        const Tensor w_gpu = be->upload(r.weights, DType::kF32);
        const Tensor out = be->alloc({tokens, e.hidden}, DType::kBF16);
        poison(out);
        be->moe_experts(x_gpu, ids_gpu, w_gpu, gu.linear, dn.linear, ws, out);
        const Tensor got = to_host(*be, out);
        const W8a8Reference ref = w8a8_experts_reference(to_host(*be, x_gpu), r, gu.host, dn.host);
        expect_close("moe_experts.w8a8", label, got, ref.out, 4e-2);
        // gate/up rows, from the workspace's expert order back to pair order.
        const Tensor rows = to_host(*be, ws.gate_up);
        const Tensor position = download_raw(*be, ws.pair_position);
        Tensor gate_up_rows = Tensor::empty(ref.gate_up_rows.shape(), DType::kF32);
        const int64_t width = 2 * e.inter;
        for (int64_t pr = 0; pr < tokens * e.k; ++pr) {
          std::memcpy(gate_up_rows.data<float>() + pr * width,
                      rows.data<float>() + position.data<int32_t>()[pr] * width,
                      width * sizeof(float));
        }
        expect_close("moe_experts.w8a8.gate_up", label, gate_up_rows, ref.gate_up_rows, 1e-2);
        if (!invariant) continue;
        for (const int64_t t : {int64_t{0}, tokens - 1}) {
          const Tensor one = be->alloc({1, e.hidden}, DType::kBF16);
          be->moe_experts(x_gpu.rows(t, t + 1), ids_gpu.rows(t, t + 1), w_gpu.rows(t, t + 1),
                          gu.linear, dn.linear, ws, one);
          const Tensor one_host = to_host(*be, one);
          EXPECT_EQ(std::memcmp(one_host.raw(), got.data<float>() + t * e.hidden,
                                e.hidden * sizeof(float)),
                    0)
              << label << ": token " << t << " alone differs from the batch";
        }
      }
    }
  }
}

// Both paths: 4 tokens x top-2 of 8 experts take the per-pair GEMVs, the batch-invariant backend
// the grouped GEMMs.
class CudaMoeGraphTest : public ::testing::TestWithParam<bool> {};

TEST_P(CudaMoeGraphTest, RouteAndExpertsReplayInAGraph) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = GetParam() ? invariant_backend() : cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(64);
  const int64_t tokens = 4, experts = 8, k = 2, hidden = 64, inter = 96;
  const Tensor gate_up = random_host({experts, 2 * inter, hidden}, rng, -0.125f, 0.125f);
  const Tensor down = random_host({experts, hidden, inter}, rng, -0.1f, 0.1f);
  const Tensor gu_gpu = to_backend(gpu, gate_up), down_gpu = to_backend(gpu, down);
  const Tensor x_gpu = gpu.alloc({tokens, hidden}, DType::kBF16);
  const Tensor logits_gpu = gpu.alloc({tokens, experts}, DType::kF32);
  const Tensor ids_gpu = gpu.alloc({tokens, k}, DType::kI32);
  const Tensor w_gpu = gpu.alloc({tokens, k}, DType::kF32);
  const Tensor out_gpu = gpu.alloc({tokens, hidden}, DType::kBF16);
  const MoeWorkspace ws = workspace(gpu, tokens, k, experts, hidden, inter);
  gpu.synchronize();
  gpu.begin_capture();
  gpu.moe_route(logits_gpu, k, true, ids_gpu, w_gpu);
  gpu.moe_experts(x_gpu, ids_gpu, w_gpu, stacked(gu_gpu), stacked(down_gpu), ws, out_gpu);
  const std::unique_ptr<BackendGraph> graph = gpu.end_capture();
  for (int replay = 0; replay < 3; ++replay) {
    // New inputs in the captured buffers: different routing every time.
    const Tensor x = random_host({tokens, hidden}, rng, -2.0f, 2.0f);
    const Tensor logits = random_host({tokens, experts}, rng, -3.0f, 3.0f);
    gpu.copy(to_backend(gpu, x), x_gpu);
    gpu.copy(gpu.upload(logits, DType::kF32), logits_gpu);
    poison(out_gpu);
    gpu.replay(*graph);
    Routed r{Tensor::empty({tokens, k}, DType::kI32), Tensor::empty({tokens, k}, DType::kF32)};
    cpu.moe_route(logits, k, true, r.ids, r.weights);
    const Tensor out_cpu = cpu.alloc({tokens, hidden}, DType::kF32);
    cpu.moe_experts(x, r.ids, r.weights, stacked(gate_up), stacked(down),
                    workspace(cpu, tokens, k, experts, hidden, inter), out_cpu);
    expect_close("moe_graph", fmt::format("replay {} invariant={}", replay, GetParam()),
                 to_host(gpu, out_gpu), out_cpu);
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, CudaMoeGraphTest, ::testing::Values(false, true));

}  // namespace
}  // namespace inflight::test
