// The CUDA backend as a serving system: the ops it added (fill_random, top_k_logits, the f32
// LM-head GEMM, batch-invariant GEMMs) against the CPU reference, decode graphs against the same
// steps run op by op (bitwise), and an 8B model of dummy weights (fill, memory, step times).
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/tiny_llama.h"
#include "cuda_test_util.h"
#include "model/arch_presets.h"
#include "model/registry.h"
#include "ops/ops_cuda.cuh"

namespace inflight::test {
namespace {

using testing::make_step;
using testing::RandomBlocks;
using testing::SeqState;

// A host copy of a device tensor of any dtype, after the stream's work so far.
Tensor raw_host(Backend& backend, const Tensor& t) {
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  backend.download(t, host);
  backend.synchronize();
  return host;
}

TEST(CudaServingTest, FillRandomMatchesTheCpuBitForBit) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  for (const int64_t n : {int64_t{1}, int64_t{1000003}}) {
    const Tensor host = Tensor::empty({n}, DType::kF32);
    cpu_backend().fill_random(host, 99, 0.02f, -0.5f);
    for (const DType dt : {DType::kBF16, DType::kF32}) {
      const Tensor dev = gpu.alloc({n}, dt);
      poison(dev);
      gpu.fill_random(dev, 99, 0.02f, -0.5f);
      const Tensor got = to_host(gpu, dev);
      int64_t mismatches = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float want = dt == DType::kBF16 ? bf16_to_f32(f32_to_bf16(host.data<float>()[i]))
                                              : host.data<float>()[i];
        mismatches += got.data<float>()[i] != want;
      }
      EXPECT_EQ(mismatches, 0) << "n " << n << " " << dtype_name(dt);
      record("fill_random", fmt::format("n={} {}", n, dtype_name(dt)), ErrorStats{},
             mismatches == 0);
    }
  }
}

// Row contents of the top-k cases; kMixed gives row r the (r % 5)-th of the others.
enum class TopKFill { kNormal, kCoarse, kSignedZeros, kMostlyNegInf, kAllNegInf, kMixed };

struct TopKCase {
  int64_t rows, vocab;
  int32_t k;
  TopKFill fill;
  int32_t chunks = 0;  // 0: through the backend (the launcher picks); else forced on the launcher
};

const char* fill_name(TopKFill f) {
  switch (f) {
    case TopKFill::kNormal:
      return "normal";
    case TopKFill::kCoarse:
      return "ties";
    case TopKFill::kSignedZeros:
      return "zeros";
    case TopKFill::kMostlyNegInf:
      return "mostly-inf";
    case TopKFill::kAllNegInf:
      return "all-inf";
    case TopKFill::kMixed:
      return "mixed";
  }
  return "?";
}

// One row of `vocab` logits: N(0, 3) (normal), 41 levels (coarse: many exact ties), +-0.0 at
// random (all equal: ids 0..k-1, values with their signs), -inf but for k / 2 finite entries
// (the top k ends in -inf entries), or -inf only (log-sum-exp -inf). Normal and coarse rows also
// hold -inf, both zeros and a tie at the top.
void fill_top_k_row(float* row, int64_t vocab, int32_t k, TopKFill fill, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> level(-20, 20);
  std::uniform_int_distribution<int64_t> position(0, vocab - 1);
  switch (fill) {
    case TopKFill::kNormal:
    case TopKFill::kCoarse:
      for (int64_t i = 0; i < vocab; ++i) {
        row[i] = fill == TopKFill::kCoarse ? static_cast<float>(level(rng)) * 0.5f : normal(rng);
      }
      if (vocab > 3) {
        row[1] = -INFINITY;
        row[2] = -0.0f;
        row[3] = 0.0f;
        row[vocab - 1] = row[vocab / 2] = 100.0f;
      }
      break;
    case TopKFill::kSignedZeros:
      for (int64_t i = 0; i < vocab; ++i) row[i] = (rng() & 1) != 0 ? -0.0f : 0.0f;
      break;
    case TopKFill::kMostlyNegInf:
      std::fill(row, row + vocab, -INFINITY);
      for (int32_t j = 0; j < std::max(1, k / 2); ++j) row[position(rng)] = normal(rng);
      break;
    case TopKFill::kAllNegInf:
      std::fill(row, row + vocab, -INFINITY);
      break;
    case TopKFill::kMixed:
      break;
  }
}

// The workspace of forced launches (on the legacy stream), zeroed once like the backend's.
void* forced_top_k_workspace() {
  static void* workspace = [] {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, kTopKLogitsCudaWorkspaceBytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, 0, kTopKLogitsCudaWorkspaceBytes), cudaSuccess);
    return p;
  }();
  return workspace;
}

// Ids and values bit for bit (-0.0 is not +0.0 here), log-sum-exp within 1e-6 (-inf where the
// reference has it), for each case against the CPU reference.
void check_top_k(const std::vector<TopKCase>& cases) {
  Backend& gpu = cuda_backend();
  std::mt19937 rng(3);
  for (const TopKCase& c : cases) {
    Tensor logits = Tensor::empty({c.rows, c.vocab}, DType::kF32);
    for (int64_t r = 0; r < c.rows; ++r) {
      const TopKFill fill = c.fill == TopKFill::kMixed ? static_cast<TopKFill>(r % 5) : c.fill;
      fill_top_k_row(logits.data<float>() + r * c.vocab, c.vocab, c.k, fill, rng);
    }
    Tensor lse_cpu = Tensor::empty({c.rows}, DType::kF32);
    Tensor ids_cpu = Tensor::empty({c.rows, c.k}, DType::kI32);
    Tensor vals_cpu = Tensor::empty({c.rows, c.k}, DType::kF32);
    cpu_backend().top_k_logits(logits, c.k, lse_cpu, ids_cpu, vals_cpu);

    Tensor dev_logits = gpu.alloc({c.rows, c.vocab}, DType::kF32);
    {
      // Upload f32 as is.
      gpu.synchronize();
      ASSERT_EQ(cudaMemcpy(dev_logits.raw(), logits.raw(), logits.nbytes(), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
    const Tensor lse = gpu.alloc({c.rows}, DType::kF32);
    const Tensor ids = gpu.alloc({c.rows, c.k}, DType::kI32);
    const Tensor vals = gpu.alloc({c.rows, c.k}, DType::kF32);
    poison(lse);
    poison(ids);
    poison(vals);
    const int32_t chunks = c.chunks > 0 ? c.chunks : top_k_logits_cuda_chunks(c.rows, c.vocab, c.k);
    if (c.chunks > 0) {
      top_k_logits_cuda(make_top_k_logits_params(dev_logits, c.k, lse, ids, vals),
                        forced_top_k_workspace(), nullptr, c.chunks);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    } else {
      gpu.top_k_logits(dev_logits, c.k, lse, ids, vals);
    }
    const Tensor got_ids = raw_host(gpu, ids), got_vals = raw_host(gpu, vals);
    const Tensor got_lse = raw_host(gpu, lse);
    int64_t id_mismatch = 0, val_mismatch = 0, lse_inf_mismatch = 0;
    for (int64_t i = 0; i < ids_cpu.numel(); ++i) {
      id_mismatch += got_ids.data<int32_t>()[i] != ids_cpu.data<int32_t>()[i];
      val_mismatch += std::bit_cast<uint32_t>(got_vals.data<float>()[i]) !=
                      std::bit_cast<uint32_t>(vals_cpu.data<float>()[i]);
    }
    for (int64_t r = 0; r < c.rows; ++r) {
      const float want = lse_cpu.data<float>()[r], got = got_lse.data<float>()[r];
      lse_inf_mismatch += std::isinf(want) && got != want;
    }
    const std::string what =
        fmt::format("rows={} vocab={} k={} {} chunks={}{}", c.rows, c.vocab, c.k, fill_name(c.fill),
                    chunks, c.chunks > 0 ? " (forced)" : "");
    EXPECT_EQ(id_mismatch, 0) << what;
    EXPECT_EQ(val_mismatch, 0) << what;
    EXPECT_EQ(lse_inf_mismatch, 0) << what;
    expect_close("top_k.log_sum_exp", what, got_lse, lse_cpu, 1e-6);
    record("top_k.ids", what, ErrorStats{},
           id_mismatch == 0 && val_mismatch == 0 && lse_inf_mismatch == 0);
  }
  // Every launch leaves the split counters (the workspace's first 1024 words) at zero.
  if (std::any_of(cases.begin(), cases.end(), [](const TopKCase& c) { return c.chunks > 1; })) {
    std::vector<uint32_t> counters(1024, 1u);
    ASSERT_EQ(cudaMemcpy(counters.data(), forced_top_k_workspace(),
                         counters.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(std::count(counters.begin(), counters.end(), 0u),
              static_cast<ptrdiff_t>(counters.size()));
  }
}

// Small enough for compute-sanitizer. Forced chunk counts run the split path on tiny
// vocabularies (down to one id per chunk) and at its limits (chunk length k, chunks * k = 4096).
TEST(CudaServingTest, TopKLogitsMatchesTheCpu) {
  INFLIGHT_REQUIRE_CUDA();
  using enum TopKFill;
  check_top_k({{1, 1, 1, kNormal},
               {3, 97, 1, kCoarse},
               {3, 97, 97, kCoarse},
               {5, 1000, 50, kCoarse},
               {7, 4099, 256, kCoarse},
               {2, 5000, 3, kNormal},
               {5, 7, 3, kMixed},
               {10, 100, 17, kMixed},
               {5, 2048, 9, kMixed},
               {5, 7, 1, kMixed, 7},
               {5, 100, 3, kMixed, 33},
               {5, 1000, 7, kMixed, 2},
               {5, 1000, 7, kMixed, 142},
               {5, 1000, 50, kMixed, 20},
               {5, 256, 128, kMixed, 2},
               {6, 4099, 256, kMixed, 16},
               {7, 4099, 1, kMixed, 100},
               {5, 2048, 2, kMixed, 3}});
}

// Llama 3 / Qwen2 vocabularies: the shapes of decode steps on both sides of the crossover
// (rows 132 / 133 on a 132-SM H200), forced chunk counts at the split path's limits (chunks * k
// = 8192, the shared list; 19 chunks of 152,064 ids, the fewest that fit it), then random shapes.
TEST(CudaServingTest, TopKLogitsAtVocabularyScale) {
  INFLIGHT_REQUIRE_CUDA();
  using enum TopKFill;
  std::vector<TopKCase> cases = {
      {37, 128256, 1, kNormal},     {37, 128256, 50, kNormal},    {9, 128256, 256, kCoarse},
      {256, 152064, 20, kNormal},   {4, 49152, 2, kCoarse},       {1, 128256, 1, kNormal},
      {1, 128256, 2, kCoarse},      {1, 128256, 20, kNormal},     {1, 128256, 50, kCoarse},
      {1, 128256, 256, kNormal},    {1, 152064, 256, kCoarse},    {2, 128256, 50, kMixed},
      {8, 128256, 256, kMixed},     {32, 128256, 20, kMixed},     {64, 128256, 256, kMixed},
      {132, 128256, 1, kMixed},     {133, 128256, 1, kMixed},     {512, 128256, 50, kMixed},
      {5, 128256, 1, kMixed, 2},    {5, 128256, 1, kMixed, 204},  {5, 128256, 2, kMixed, 16},
      {5, 128256, 50, kMixed, 163}, {5, 128256, 256, kMixed, 16}, {5, 128256, 256, kMixed, 32},
      {2, 152064, 256, kMixed, 19}, {8, 49152, 100, kMixed, 64}};
  std::mt19937 rng(17);
  const int64_t row_counts[] = {1,  2,  3,  4,   5,   7,   8,   13,  16,  31,  32,
                                33, 64, 65, 100, 131, 132, 133, 200, 256, 300, 512};
  const int64_t vocabs[] = {7,    100,   1000,  1023,  1024,   1025,
                            4099, 32000, 49152, 65537, 128256, 152064};
  for (int i = 0; i < 24; ++i) {
    const int64_t vocab = vocabs[rng() % std::size(vocabs)];
    int64_t rows = row_counts[rng() % std::size(row_counts)];
    while (rows > 1 && rows * vocab > (int64_t{24} << 20)) rows /= 2;  // host reference time
    const auto k_max = static_cast<int32_t>(std::min<int64_t>(vocab, kTopKLogitsMax));
    const uint32_t pick = rng() % 8;
    const int32_t k = pick == 0   ? 1
                      : pick == 1 ? k_max
                                  : 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(k_max));
    cases.push_back({rows, vocab, k, i % 3 == 0 ? kCoarse : kMixed});
  }
  check_top_k(cases);
}

TEST(CudaServingTest, GemmWithF32OutputAndBatchInvariantMode) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  std::mt19937 rng(11);
  CudaBackendOptions invariant_options;
  invariant_options.batch_invariant = true;
  const std::unique_ptr<Backend> invariant = make_cuda_backend(0, invariant_options);
  for (const auto& [m, n, k] :
       {std::tuple{1, 1000, 576}, std::tuple{37, 4099, 256}, std::tuple{256, 2048, 1024}}) {
    const Tensor x = random_host({m, k}, rng), w = random_host({n, k}, rng, -0.1f, 0.1f);
    const Tensor y_cpu = Tensor::empty({m, n}, DType::kF32);
    cpu_backend().gemm(x, Linear{w}, y_cpu);
    const std::string what = fmt::format("m={} n={} k={}", m, n, k);
    for (Backend* b : {&gpu, invariant.get()}) {
      const Tensor xd = to_backend(*b, x), wd = to_backend(*b, w);
      const Tensor y = b->alloc({m, n}, DType::kF32);
      poison(y);
      b->gemm(xd, Linear{wd}, y);
      const Tensor got = to_host(*b, y);
      // f32 output: only the operands' bf16 rounding (none here) and the summation order differ.
      expect_close(b == &gpu ? "gemm.f32_out" : "gemm.f32_out_invariant", what, got, y_cpu, 1e-4);
      if (b != &gpu) {
        // Each row alone gives the bits it gets inside the batch.
        int64_t differing = 0;
        for (const int64_t r : {int64_t{0}, static_cast<int64_t>(m) - 1}) {
          const Tensor y1 = b->alloc({1, n}, DType::kF32);
          b->gemm(xd.rows(r, r + 1), Linear{wd}, y1);
          const Tensor one = to_host(*b, y1);
          differing += std::memcmp(one.raw(), got.data<float>() + r * n, n * sizeof(float)) != 0;
        }
        EXPECT_EQ(differing, 0) << what;
        record("gemm.batch_invariant", what, ErrorStats{}, differing == 0);
      }
    }
  }
}

TEST(CudaServingTest, GemvMatchesTheCpu) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  std::mt19937 rng(13);
  for (const int64_t m : {1, 2, 3, 5, 8}) {
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{1, 8}, {769, 576}, {4096, 4104}}) {
      for (const bool bias : {false, true}) {
        const Tensor x = random_host({m, k}, rng), w = random_host({n, k}, rng, -0.1f, 0.1f);
        const Tensor b = random_host({n}, rng);
        const Tensor y_cpu = Tensor::empty({m, n}, DType::kF32);
        cpu_backend().gemm(x, Linear{w, bias ? b : Tensor()}, y_cpu);
        const Tensor xd = to_backend(gpu, x), wd = to_backend(gpu, w), bd = to_backend(gpu, b);
        const std::string what = fmt::format("m={} n={} k={} bias={}", m, n, k, bias);
        for (const DType out : {DType::kF32, DType::kBF16}) {
          const Tensor y = gpu.alloc({m, n}, out);
          poison(y);
          const GemmParams p = make_gemm_params(xd, wd, bias ? &bd : nullptr, y);
          ASSERT_TRUE(gemv_cuda_supported(p)) << what;
          gemv_cuda(p, nullptr);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          expect_close(out == DType::kF32 ? "gemv.f32_out" : "gemv.bf16_out", what, to_host(gpu, y),
                       y_cpu, out == DType::kF32 ? 1e-4 : kBf16Tolerance);
        }
        // The GELU epilogue: gelu of the f32 sums, rounded once.
        const Tensor act_cpu = Tensor::empty({m, n}, DType::kF32);
        cpu_backend().gelu(y_cpu, act_cpu);
        const Tensor act = gpu.alloc({m, n}, DType::kBF16);
        poison(act);
        gemv_cuda(make_gemm_params(xd, wd, bias ? &bd : nullptr, act), nullptr,
                  GemmEpilogue::kGelu);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        expect_close("gemv.gelu", what, to_host(gpu, act), act_cpu);
      }
    }
  }
}

// The GEMMs of a Llama-3.1-8B layer and its LM head at decode batch sizes: the tuner's choice
// (its debug line shows both candidates) and the time per product, as read bandwidth.
TEST(CudaServingTest, GemmTimesAtLlama8BShapes) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  spdlog::set_level(spdlog::level::debug);
  std::mt19937 rng(17);
  struct Shape8B {
    const char* name;
    int64_t n, k;
    bool f32;
  };
  const Shape8B shapes[] = {{"qkv", 6144, 4096, false},
                            {"o", 4096, 4096, false},
                            {"gate_up", 28672, 4096, false},
                            {"down", 4096, 14336, false},
                            {"lm_head", 128256, 4096, true}};
  for (const Shape8B& s : shapes) {
    const Tensor w = gpu.alloc({s.n, s.k}, DType::kBF16);
    gpu.fill_random(w, 5, 0.02f, 0.0f);
    for (const int64_t m : {1, 4, 256}) {
      const Tensor x = gpu.alloc({m, s.k}, DType::kBF16);
      gpu.fill_random(x, 6, 1.0f, 0.0f);
      const Tensor y = gpu.alloc({m, s.n}, s.f32 ? DType::kF32 : DType::kBF16);
      gpu.gemm(x, Linear{w}, y);  // plan (and tuning)
      gpu.synchronize();
      constexpr int kReps = 50;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kReps; ++i) gpu.gemm(x, Linear{w}, y);
      gpu.synchronize();
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          kReps;
      std::printf("gemm %-8s m=%-4lld n=%-6lld k=%-5lld %8.1f us  %7.0f GB/s of weights\n", s.name,
                  static_cast<long long>(m), static_cast<long long>(s.n),
                  static_cast<long long>(s.k), us, static_cast<double>(w.nbytes()) / us / 1e3);
    }
  }
  spdlog::set_level(spdlog::level::info);
}

// Two models with the same weights on the device: one pads decode steps to graph buckets and
// runs them op by op, the other captures and replays graphs. Their logits must agree bit for bit
// over decode steps whose batch sizes and block-table widths move within and across buckets.
TEST(CudaServingTest, DecodeGraphReplaysAreBitwiseThePaddedSteps) {
  INFLIGHT_REQUIRE_CUDA();
  ModelConfig c = testing::tiny_config("llama");
  c.vocab_size = 1000;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_layers = 3;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  const auto weights = testing::random_weights(c, 7);
  const WeightSource source = weights_of(weights);
  // One backend for both, so that both take the same GEMM plans (timed choices included).
  const std::shared_ptr<Backend> gpu = make_cuda_backend(0);
  auto padded = make_runner(gpu, c, &source, 0, {GraphMode::kPadOnly});
  auto captured = make_runner(gpu, c, &source, 0, {GraphMode::kCapture});
  padded->reserve_workspace(512, 64);
  captured->reserve_workspace(512, 64);
  constexpr int32_t kBlock = 16;
  KvCache cache_a = padded->model().make_kv_cache(256, kBlock),
          cache_b = captured->model().make_kv_cache(256, kBlock);
  // One step through the runner (graphs as configured), its logits on the host.
  const auto forward = [](DeviceRunner& r, const ForwardBatch& batch, KvCache& cache) {
    const Tensor dev = r.enqueue(batch, cache);
    Tensor host = Tensor::empty(dev.shape(), DType::kF32);
    r.backend().download_f32(dev, host);
    r.backend().synchronize();
    return host;
  };
  std::mt19937 rng(5);
  std::vector<SeqState> seqs(12);
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].tokens = testing::random_tokens(3 + static_cast<int64_t>(rng() % 40), c.vocab_size,
                                            static_cast<uint32_t>(i));
  }
  RandomBlocks pool(256, 9);
  std::vector<std::pair<SeqState*, int32_t>> prefill;
  for (SeqState& s : seqs) prefill.emplace_back(&s, static_cast<int32_t>(s.tokens.size()));
  ForwardBatch b = make_step(prefill, kBlock, pool);
  forward(*padded, b, cache_a);
  forward(*captured, b, cache_b);
  const int sizes[] = {12, 9, 5, 12, 1, 3, 8, 7, 12, 2, 4, 11, 6, 12, 10, 1, 12, 9, 5, 12};
  int steps = 0, identical = 0;
  for (const int s : sizes) {
    std::vector<std::pair<SeqState*, int32_t>> work;
    for (int i = 0; i < s; ++i) {
      SeqState& seq = seqs[static_cast<size_t>(i)];
      if (seq.computed == static_cast<int32_t>(seq.tokens.size())) {
        seq.tokens.push_back(static_cast<int32_t>(rng() % c.vocab_size));
      }
      work.emplace_back(&seq, 1);
    }
    b = make_step(work, kBlock, pool);
    const Tensor la = forward(*padded, b, cache_a), lb = forward(*captured, b, cache_b);
    ++steps;
    identical += std::memcmp(la.raw(), lb.raw(), la.nbytes()) == 0;
    for (int64_t i = 0; i < la.numel(); ++i) ASSERT_TRUE(std::isfinite(la.data<float>()[i]));
  }
  EXPECT_EQ(identical, steps);
  EXPECT_GE(captured->graphs().size(), 4u) << "buckets 1, 2, 4, 8 and 16 were used";
  std::printf("decode graphs: %d of %d steps bitwise identical, %zu graphs captured\n", identical,
              steps, captured->graphs().size());
  record("decode_graph.bitwise", fmt::format("{} steps", steps), ErrorStats{}, identical == steps);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// One decode step per sequence of `seqs` (each grows by one token); returns the step's seconds.
double decode_step(DeviceRunner& runner, std::vector<SeqState>& seqs, RandomBlocks& pool,
                   int32_t block_size) {
  std::vector<std::pair<SeqState*, int32_t>> work;
  for (SeqState& s : seqs) work.emplace_back(&s, 1);
  const ForwardBatch b = make_step(work, block_size, pool);
  LogitsRequest greedy;
  greedy.top_k = 1;
  const auto t0 = std::chrono::steady_clock::now();
  runner.begin_step(b, greedy);
  const StepLogits& out = runner.end_step();
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int32_t r = 0; r < out.num_rows; ++r) {
    EXPECT_TRUE(std::isfinite(out.log_sum_exp.data<float>()[r]));
    seqs[static_cast<size_t>(r)].tokens.push_back(out.top_ids.data<int32_t>()[r]);
  }
  return dt;
}

// Llama-3.1-8B shapes with dummy weights made on the device: fill time, memory, and decode step
// times at batch 1 and 256 straight through the runner (graphs, device candidates), with the
// weight-read floor from a device-to-device copy measured in the same process.
TEST(CudaServingTest, DummyLlama31_8B) {
  INFLIGHT_REQUIRE_CUDA();
  const ModelConfig config = *arch_preset("llama-3.1-8b");
  const auto t0 = std::chrono::steady_clock::now();
  auto runner_owner = make_runner(make_cuda_backend(0), config, nullptr, kDummyWeightsSeed);
  DeviceRunner& runner = *runner_owner;
  runner.backend().synchronize();
  const double fill_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  constexpr int32_t kBlock = 16, kContext = 128;
  runner.reserve_workspace(2048, 256);
  runner.init_kv_cache(256 * 24, kBlock);  // 256 sequences of up to 384 tokens
  const RunnerMemory mem = runner.memory();

  // Copy bandwidth: 2 GiB device to device, bytes read + written, median of 10.
  double copy_gbps = 0.0;
  {
    const size_t bytes = size_t{2} << 30;
    void *a = nullptr, *b = nullptr;
    ASSERT_EQ(cudaMalloc(&a, bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&b, bytes), cudaSuccess);
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    std::vector<double> times;
    for (int i = 0; i < 12; ++i) {
      cudaEventRecord(start);
      cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      if (i >= 2) times.push_back(ms / 1e3);
    }
    copy_gbps = 2.0 * static_cast<double>(bytes) / median(times) / 1e9;
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(a);
    cudaFree(b);
  }

  RandomBlocks pool(256 * 24, 1);
  std::vector<SeqState> seqs(256);
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].tokens = testing::random_tokens(kContext, config.vocab_size, static_cast<uint32_t>(i));
  }
  // Batch 1: prefill one sequence, then decode.
  std::vector<SeqState> one(seqs.begin(), seqs.begin() + 1);
  {
    std::vector<std::pair<SeqState*, int32_t>> work{{&one[0], kContext}};
    ForwardBatch b = make_step(work, kBlock, pool);
    b.logits_indices = {kContext - 1};
    LogitsRequest greedy;
    greedy.top_k = 1;
    runner.begin_step(b, greedy);
    one[0].tokens.push_back(runner.end_step().top_ids.data<int32_t>()[0]);
  }
  std::vector<double> b1;
  for (int i = 0; i < 60; ++i) {
    const double dt = decode_step(runner, one, pool, kBlock);
    if (i >= 10) b1.push_back(dt);
  }
  // Batch 256: prefill in chunks of 2048 tokens (16 sequences), then decode.
  for (size_t s = 0; s < seqs.size(); s += 16) {
    std::vector<std::pair<SeqState*, int32_t>> work;
    for (size_t i = s; i < s + 16; ++i) work.emplace_back(&seqs[i], kContext);
    ForwardBatch b = make_step(work, kBlock, pool);
    b.logits_indices.clear();
    for (int i = 1; i <= 16; ++i) b.logits_indices.push_back(i * kContext - 1);
    LogitsRequest greedy;
    greedy.top_k = 1;
    runner.begin_step(b, greedy);
    const StepLogits& out = runner.end_step();
    for (int i = 0; i < 16; ++i) seqs[s + i].tokens.push_back(out.top_ids.data<int32_t>()[i]);
  }
  std::vector<double> b256;
  for (int i = 0; i < 24; ++i) {
    const double dt = decode_step(runner, seqs, pool, kBlock);
    if (i >= 4) b256.push_back(dt);
  }
  // Bytes a decode step must read: every weight but the embedding table (gathered by row).
  const int64_t read_bytes = mem.weights - config.vocab_size * config.hidden_size * 2;
  const double floor_s = static_cast<double>(read_bytes) / (copy_gbps * 1e9);
  std::printf(
      "dummy llama-3.1-8b: weights %.2f GiB filled in %.2f s; free after weights, workspace and "
      "KV %.2f GiB\n"
      "copy bandwidth (d2d, read + write) %.0f GB/s -> weight-read floor %.3f ms/step = %.1f "
      "tokens/s at batch 1\n"
      "batch 1 decode step (runner, graphs, wall): median %.3f ms = %.1f tokens/s = %.1f%% of the "
      "floor\n"
      "batch 256 decode step at ~%d tokens of context: median %.2f ms = %.0f tokens/s\n",
      static_cast<double>(mem.weights) / (1 << 30), fill_s,
      static_cast<double>(runner.memory().free) / (1 << 30), copy_gbps, floor_s * 1e3,
      1.0 / floor_s, median(b1) * 1e3, 1.0 / median(b1), 100.0 * floor_s / median(b1),
      kContext + 14, median(b256) * 1e3, 256.0 / median(b256));
  EXPECT_GT(mem.weights, int64_t{14} << 30);
  EXPECT_LT(fill_s, 30.0);
}

// Decode steps of batch 1 at Llama-3.1-8B widths (4 layers), op by op (no graph), between
// cudaProfilerStart/Stop: `ncu --profile-from-start off --print-summary per-kernel` over this
// test gives each kernel's share of a step (dev/cuda/device_run.sh, step profile_b1).
TEST(CudaServingTest, ProfileBatch1DecodeKernels) {
  INFLIGHT_REQUIRE_CUDA();
  ModelConfig config = *arch_preset("llama-3.1-8b");
  config.num_layers = 4;
  RunnerOptions options;
  options.graph_mode = GraphMode::kPadOnly;
  auto runner_owner =
      make_runner(make_cuda_backend(0), config, nullptr, kDummyWeightsSeed, options);
  DeviceRunner& runner = *runner_owner;
  constexpr int32_t kBlock = 16, kContext = 128;
  runner.reserve_workspace(256, 8);
  runner.init_kv_cache(64, kBlock);
  RandomBlocks pool(64, 1);
  std::vector<SeqState> one(1);
  one[0].tokens = testing::random_tokens(kContext, config.vocab_size, 1);
  std::vector<std::pair<SeqState*, int32_t>> work{{&one[0], kContext}};
  ForwardBatch b = make_step(work, kBlock, pool);
  b.logits_indices = {kContext - 1};
  LogitsRequest greedy;
  greedy.top_k = 1;
  runner.begin_step(b, greedy);
  one[0].tokens.push_back(runner.end_step().top_ids.data<int32_t>()[0]);
  for (int i = 0; i < 3; ++i) decode_step(runner, one, pool, kBlock);
  ASSERT_EQ(cudaProfilerStart(), cudaSuccess);
  for (int i = 0; i < 3; ++i) decode_step(runner, one, pool, kBlock);
  ASSERT_EQ(cudaProfilerStop(), cudaSuccess);
}

}  // namespace
}  // namespace inflight::test
