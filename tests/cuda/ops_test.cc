// CUDA backend vs the CPU reference: memory paths and the element-wise / matrix ops, on random
// bf16-exact inputs with NaN-poisoned outputs, over awkward shapes (1, primes, 769, ...).
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "cuda_test_util.h"
#include "ops/ops_cuda.cuh"

namespace inflight::test {
namespace {

// A batch whose token_ids carry `indices` (only token_ids is read by gather_rows).
ForwardBatch index_batch(const std::vector<int32_t>& indices) {
  ForwardBatch b;
  b.token_ids = indices;
  b.positions.assign(indices.size(), 0);
  b.slot_mapping.assign(indices.size(), 0);
  b.query_start = {0, static_cast<int32_t>(indices.size())};
  b.context_lens = {static_cast<int32_t>(indices.size())};
  b.max_blocks_per_seq = 1;
  b.block_tables = {0};
  b.logits_indices = indices;
  return b;
}

TEST(CudaBackendTest, UploadDownloadRoundTrip) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  EXPECT_EQ(gpu.compute_dtype(), DType::kBF16);
  std::mt19937 rng(1);
  for (const int64_t n : {int64_t{1}, int64_t{769}, int64_t{5'000'001}}) {
    const Tensor host = random_host({n}, rng, -3.0f, 3.0f);  // bf16-exact: round trip is exact
    for (const DType dt : {DType::kBF16, DType::kF32}) {
      const Tensor dev = gpu.upload(host, dt);
      EXPECT_TRUE(dev.device().is_cuda());
      const Tensor back = to_host(gpu, dev);
      EXPECT_EQ(std::memcmp(back.raw(), host.raw(), host.nbytes()), 0)
          << "n=" << n << " " << dtype_name(dt);
    }
  }
  // Several downloads in flight before one synchronize.
  const Tensor a = random_host({3, 5}, rng), b = random_host({1000}, rng);
  const Tensor da = to_backend(gpu, a), db = to_backend(gpu, b);
  Tensor ha = Tensor::empty(a.shape(), DType::kF32), hb = Tensor::empty(b.shape(), DType::kF32);
  gpu.download_f32(da, ha);
  gpu.download_f32(db, hb);
  gpu.synchronize();
  EXPECT_EQ(std::memcmp(ha.raw(), a.raw(), a.nbytes()), 0);
  EXPECT_EQ(std::memcmp(hb.raw(), b.raw(), b.nbytes()), 0);
}

TEST(CudaBackendTest, UploadBatchMatchesLayout) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  ForwardBatch b;  // the example of forward_batch.h
  b.token_ids = {10, 11, 12, 13, 14, 15, 19};
  b.positions = {0, 1, 2, 3, 4, 5, 9};
  b.slot_mapping = {28, 29, 30, 31, 8, 9, 13};
  b.query_start = {0, 6, 7};
  b.context_lens = {6, 10};
  b.max_blocks_per_seq = 3;
  b.block_tables = {7, 2, -1, 0, 5, 3};
  b.logits_indices = {5, 6};
  b.validate(4, 8);
  for (int rep = 0; rep < 3; ++rep) {  // the staging and device buffers are reused
    b.token_ids[0] = 100 + rep;
    const StepInputs in = gpu.upload_batch(b);
    EXPECT_EQ(in.num_tokens, 7);
    EXPECT_EQ(in.num_seqs, 2);
    EXPECT_EQ(in.max_query_len, 6);
    EXPECT_EQ(in.max_context_len, 10);
    gpu.synchronize();
    auto fetch = [](const Tensor& t, size_t esize) {
      std::vector<char> v(static_cast<size_t>(t.numel()) * esize);
      EXPECT_EQ(cudaMemcpy(v.data(), t.raw(), v.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      return v;
    };
    auto same = [&](const Tensor& t, const auto& expect) {
      const std::vector<char> got = fetch(t, sizeof(expect[0]));
      return got.size() == expect.size() * sizeof(expect[0]) &&
             std::memcmp(got.data(), expect.data(), got.size()) == 0;
    };
    EXPECT_TRUE(same(in.token_ids, b.token_ids));
    EXPECT_TRUE(same(in.positions, b.positions));
    EXPECT_TRUE(same(in.slot_mapping, b.slot_mapping));
    EXPECT_TRUE(same(in.query_start, b.query_start));
    EXPECT_TRUE(same(in.context_lens, b.context_lens));
    EXPECT_TRUE(same(in.block_tables, b.block_tables));
    EXPECT_TRUE(same(in.logits_indices, b.logits_indices));
  }
}

TEST(CudaOpsTest, GatherRows) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(2);
  struct Case {
    int64_t src_rows, cols, n;
  };
  for (const Case c : {Case{1, 1, 1}, Case{7, 3, 3}, Case{769, 577, 91}, Case{50, 576, 7},
                       Case{13, 769, 13}, Case{2, 8, 1}}) {
    const Tensor src = random_host({c.src_rows, c.cols}, rng);
    // first > 0: src is a shard of a table (rows [first, first + src_rows)); indices outside it
    // gather zeros.
    for (const int64_t first : {int64_t{0}, c.src_rows / 2 + 1}) {
      std::vector<int32_t> idx(static_cast<size_t>(c.n));
      std::uniform_int_distribution<int32_t> pick(
          0, static_cast<int32_t>(c.src_rows + (first > 0 ? 2 * first : 0)) - 1);
      for (int32_t& i : idx) i = pick(rng);
      const ForwardBatch batch = index_batch(idx);
      for (const DType dt : {DType::kBF16, DType::kF32}) {
        const Tensor src_gpu = gpu.upload(src, dt);
        const StepInputs in_gpu = gpu.upload_batch(batch);
        const Tensor dst_gpu = gpu.alloc({c.n, c.cols}, dt);
        poison(dst_gpu);
        gpu.gather_rows(src_gpu, in_gpu.token_ids, dst_gpu, first);
        const StepInputs in_cpu = cpu.upload_batch(batch);
        const Tensor src_cpu = to_backend(cpu, src);
        const Tensor dst_cpu = cpu.alloc({c.n, c.cols}, DType::kF32);
        cpu.gather_rows(src_cpu, in_cpu.token_ids, dst_cpu, first);
        const ErrorStats s = expect_close(
            "gather_rows",
            fmt::format("{}x{} n={} first={} {}", c.src_rows, c.cols, c.n, first, dtype_name(dt)),
            to_host(gpu, dst_gpu), dst_cpu);
        EXPECT_EQ(s.max_abs, 0.0) << "a row copy must be exact";
      }
    }
  }
}

TEST(CudaOpsTest, RmsNormFusedResidual) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(3);
  for (const int64_t rows : {1, 3, 7, 91}) {
    for (const int64_t dim : {1, 7, 576, 769, 4096}) {
      for (const bool with_add : {false, true}) {
        const Tensor residual = random_host({rows, dim}, rng, -4.0f, 4.0f);
        const Tensor add = random_host({rows, dim}, rng, -2.0f, 2.0f);
        const Tensor weight = random_host({dim}, rng, 0.5f, 1.5f);
        const float eps = 1e-5f;
        const Tensor res_gpu = to_backend(gpu, residual), add_gpu = to_backend(gpu, add);
        const Tensor w_gpu = to_backend(gpu, weight),
                     out_gpu = gpu.alloc({rows, dim}, DType::kBF16);
        poison(out_gpu);
        gpu.rms_norm(with_add ? &add_gpu : nullptr, res_gpu, w_gpu, eps, out_gpu);
        const Tensor res_cpu = to_backend(cpu, residual), add_cpu = to_backend(cpu, add);
        const Tensor w_cpu = to_backend(cpu, weight), out_cpu = cpu.alloc({rows, dim}, DType::kF32);
        cpu.rms_norm(with_add ? &add_cpu : nullptr, res_cpu, w_cpu, eps, out_cpu);
        const std::string what = fmt::format("{}x{} add={}", rows, dim, with_add);
        expect_close("rms_norm.out", what, to_host(gpu, out_gpu), out_cpu);
        expect_close("rms_norm.residual", what, to_host(gpu, res_gpu), res_cpu);
      }
    }
  }
}

TEST(CudaOpsTest, Swiglu) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(4);
  for (const int64_t rows : {1, 3, 7}) {
    for (const int64_t inter : {1, 13, 769, 1536}) {
      const Tensor gate_up = random_host({rows, 2 * inter}, rng, -6.0f, 6.0f);
      const Tensor gu_gpu = to_backend(gpu, gate_up),
                   out_gpu = gpu.alloc({rows, inter}, DType::kBF16);
      poison(out_gpu);
      gpu.swiglu(gu_gpu, out_gpu);
      const Tensor out_cpu = cpu.alloc({rows, inter}, DType::kF32);
      cpu.swiglu(to_backend(cpu, gate_up), out_cpu);
      expect_close("swiglu", fmt::format("{}x{}", rows, inter), to_host(gpu, out_gpu), out_cpu);
    }
  }
}

// MPT's LayerNorm: rows with a large mean (the variance must be taken around it), the
// residual add and the bias each on and off, row lengths on and off the 8-element grid, in and
// past the rows held in registers (8192). The statistics are taken over the residual as stored
// in bf16, so the output is checked against the CPU's LayerNorm of that stored residual (the
// CPU's own sum stays f32: on rows of 7 elements with a mean of 16 and a deviation of 2, that
// rounding alone moves the output by 1-2%).
TEST(CudaOpsTest, LayerNormFusedResidual) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(31);
  for (const int64_t rows : {1, 3, 91}) {
    for (const int64_t dim : {1, 7, 769, 4096, 8192, 8200}) {
      for (const bool with_add : {false, true}) {
        for (const bool with_bias : {false, true}) {
          const Tensor residual = random_host({rows, dim}, rng, 12.0f, 20.0f);
          const Tensor add = random_host({rows, dim}, rng, -2.0f, 2.0f);
          const Tensor weight = random_host({dim}, rng, 0.5f, 1.5f);
          const Tensor bias = random_host({dim}, rng, -0.5f, 0.5f);
          const float eps = 1e-5f;
          const Tensor res_gpu = to_backend(gpu, residual), add_gpu = to_backend(gpu, add);
          const Tensor w_gpu = to_backend(gpu, weight), b_gpu = to_backend(gpu, bias);
          const Tensor out_gpu = gpu.alloc({rows, dim}, DType::kBF16);
          poison(out_gpu);
          gpu.layer_norm(with_add ? &add_gpu : nullptr, res_gpu, w_gpu,
                         with_bias ? &b_gpu : nullptr, eps, out_gpu);
          const Tensor res_cpu = to_backend(cpu, residual), add_cpu = to_backend(cpu, add);
          const Tensor w_cpu = to_backend(cpu, weight), b_cpu = to_backend(cpu, bias);
          const Tensor out_cpu = cpu.alloc({rows, dim}, DType::kF32);
          cpu.layer_norm(with_add ? &add_cpu : nullptr, res_cpu, w_cpu,
                         with_bias ? &b_cpu : nullptr, eps, out_cpu);
          const std::string what =
              fmt::format("{}x{} add={} bias={}", rows, dim, with_add, with_bias);
          const Tensor stored = to_host(gpu, res_gpu);
          expect_close("layer_norm.residual", what, stored, res_cpu);
          const Tensor stored_cpu = to_backend(cpu, stored);
          cpu.layer_norm(nullptr, stored_cpu, w_cpu, with_bias ? &b_cpu : nullptr, eps, out_cpu);
          expect_close("layer_norm.out", what, to_host(gpu, out_gpu), out_cpu);
        }
      }
    }
  }
}

// MPT's MLP activation (in place, as the model runs it) and clip_qkv.
TEST(CudaOpsTest, GeluAndClamp) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(32);
  for (const int64_t rows : {1, 3, 7}) {
    for (const int64_t cols : {1, 13, 769, 16384}) {
      const Tensor x = random_host({rows, cols}, rng, -6.0f, 6.0f);
      const Tensor x_gpu = to_backend(gpu, x), x_cpu = to_backend(cpu, x);
      gpu.gelu(x_gpu, x_gpu);
      cpu.gelu(x_cpu, x_cpu);
      const std::string what = fmt::format("{}x{}", rows, cols);
      expect_close("gelu", what, to_host(gpu, x_gpu), x_cpu);
      const Tensor y_gpu = to_backend(gpu, x), y_cpu = to_backend(cpu, x);
      gpu.clamp(y_gpu, 1.5f);
      cpu.clamp(y_cpu, 1.5f);
      const ErrorStats s = expect_close("clamp", what, to_host(gpu, y_gpu), y_cpu);
      EXPECT_EQ(s.max_abs, 0.0) << "clamping bf16-exact values to a bf16-exact limit is exact";
    }
  }
}

// MPT's up projection with its GELU (Backend::gemm_gelu): fused into the GEMV where the tuner
// picks it (small m), a GELU kernel after cuBLASLt otherwise; both against the CPU's gemm then
// gelu.
TEST(CudaOpsTest, GemmGeluMatchesGemmThenGelu) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(34);
  for (const int64_t m : {1, 3, 8, 64}) {
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{1024, 512}, {768, 1032}}) {
      for (const bool bias : {false, true}) {
        const Tensor x = random_host({m, k}, rng, -2.0f, 2.0f);
        const Tensor w = random_host({n, k}, rng, -0.1f, 0.1f), b = random_host({n}, rng);
        const Tensor want = cpu.alloc({m, n}, DType::kF32);
        cpu.gemm_gelu(x, Linear{w, bias ? b : Tensor()}, want);
        const Tensor got = gpu.alloc({m, n}, DType::kBF16);
        poison(got);
        gpu.gemm_gelu(to_backend(gpu, x),
                      Linear{to_backend(gpu, w), bias ? to_backend(gpu, b) : Tensor()}, got);
        expect_close("gemm_gelu", fmt::format("m={} n={} k={} bias={}", m, n, k, bias),
                     to_host(gpu, got), want);
      }
    }
  }
}

struct GemmCase {
  int64_t m, n, k;
  bool bias;
  bool misaligned;  // operands viewed at an odd row offset (alignment below 16 bytes)
};

TEST(CudaOpsTest, GemmCublasLtAndFallback) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(5);
  const GemmCase cases[] = {{1, 1, 1, false, false},
                            {1, 576, 576, true, false},
                            {3, 769, 577, false, false},
                            {7, 13, 769, true, false},
                            {91, 1536, 576, false, false},
                            {128, 1024, 2048, true, false},
                            {5, 49152, 576, false, false},
                            {3, 769, 577, true, true},
                            {17, 64, 31, false, true},
                            {2, 3, 5, true, false},
                            // prefill-sized m
                            {150, 1024, 2048, true, false},
                            {2048, 512, 256, false, false}};
  for (const GemmCase& c : cases) {
    const int64_t pad = c.misaligned ? 1 : 0;
    const Tensor x = random_host({c.m + pad, c.k}, rng);
    const Tensor w = random_host({c.n, c.k}, rng, -0.5f, 0.5f);
    const Tensor bias = random_host({c.n}, rng);
    const Tensor x_gpu_all = to_backend(gpu, x);
    const Tensor x_gpu = x_gpu_all.rows(pad, pad + c.m);
    const Tensor w_gpu = to_backend(gpu, w), b_gpu = to_backend(gpu, bias);
    const Tensor y_all = gpu.alloc({c.m + pad, c.n}, DType::kBF16);
    const Tensor y_gpu = y_all.rows(pad, pad + c.m);
    const Tensor x_cpu = to_backend(cpu, x).rows(pad, pad + c.m);
    const Tensor y_cpu = cpu.alloc({c.m, c.n}, DType::kF32);
    cpu.gemm(x_cpu, Linear{to_backend(cpu, w), c.bias ? bias : Tensor()}, y_cpu);
    const std::string what =
        fmt::format("m={} n={} k={} bias={} misaligned={}", c.m, c.n, c.k, c.bias, c.misaligned);
    poison(y_gpu);
    gpu.gemm(x_gpu, Linear{w_gpu, c.bias ? b_gpu : Tensor()}, y_gpu);
    expect_close("gemm.cublaslt", what, to_host(gpu, y_gpu), y_cpu);
    // The CUDA-core fallback on the legacy stream, drained around it.
    poison(y_gpu);
    gemm_cuda(make_gemm_params(x_gpu, w_gpu, c.bias ? &b_gpu : nullptr, y_gpu), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_close("gemm.fallback", what, to_host(gpu, y_gpu), y_cpu);
  }
}

// Structured output's mask: random row subsets and masks over awkward vocabularies (not a
// multiple of 32, 1 token, a 151k-token vocabulary), bit-exact against the CPU reference.
TEST(CudaOpsTest, TokenBitmask) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(11);
  struct Case {
    int64_t rows, vocab;
  };
  for (const Case c : {Case{1, 1}, Case{3, 33}, Case{8, 769}, Case{5, 49152}, Case{2, 151936}}) {
    const int64_t words = (c.vocab + 31) / 32;
    const Tensor logits = random_host({c.rows, c.vocab}, rng);
    std::vector<int32_t> picked;
    for (int32_t r = 0; r < c.rows; ++r) {
      if (rng() % 3 != 0 || picked.empty()) picked.push_back(r);
    }
    const auto m = static_cast<int64_t>(picked.size());
    Tensor rows = Tensor::empty({m}, DType::kI32);
    std::copy(picked.begin(), picked.end(), rows.data<int32_t>());
    Tensor bits = Tensor::empty({m, words}, DType::kI32);
    for (int64_t i = 0; i < m * words; ++i) {
      // Sparse, dense, empty and full words.
      const uint32_t kind = rng() % 4;
      const uint32_t w = kind == 0 ? 0u : kind == 1 ? ~0u : static_cast<uint32_t>(rng() & rng());
      bits.data<int32_t>()[i] = static_cast<int32_t>(w);
    }
    const Tensor logits_gpu = gpu.upload(logits, DType::kF32);
    gpu.apply_token_bitmask(logits_gpu, rows, bits);
    const Tensor logits_cpu = to_backend(cpu, logits);
    cpu.apply_token_bitmask(logits_cpu, rows, bits);
    const Tensor got = to_host(gpu, logits_gpu);
    EXPECT_EQ(std::memcmp(got.data<float>(), logits_cpu.data<float>(),
                          static_cast<size_t>(c.rows * c.vocab) * sizeof(float)),
              0)
        << c.rows << "x" << c.vocab;
  }
}

// The padded vocabulary's mask: every row, exactly the columns from `begin` on, bit-exact
// against the CPU reference (Qwen2's 151,936 columns for 151,665 tokens among the shapes).
TEST(CudaOpsTest, VocabPaddingMask) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(13);
  struct Case {
    int64_t rows, columns, begin;
  };
  for (const Case c : {Case{1, 1, 0}, Case{3, 33, 32}, Case{7, 769, 769}, Case{5, 49152, 49000},
                       Case{2, 151936, 151665}}) {
    const Tensor logits = random_host({c.rows, c.columns}, rng);
    const Tensor logits_gpu = gpu.upload(logits, DType::kF32);
    gpu.mask_vocab_padding(logits_gpu, c.begin);
    const Tensor logits_cpu = to_backend(cpu, logits);
    cpu.mask_vocab_padding(logits_cpu, c.begin);
    const Tensor got = to_host(gpu, logits_gpu);
    EXPECT_EQ(std::memcmp(got.data<float>(), logits_cpu.data<float>(),
                          static_cast<size_t>(c.rows * c.columns) * sizeof(float)),
              0)
        << c.rows << "x" << c.columns << " from " << c.begin;
  }
}

TEST(CudaOpsTest, RejectsWrongDevice) {
  INFLIGHT_REQUIRE_CUDA();
  Backend& gpu = cuda_backend();
  const Tensor host = Tensor::zeros({2, 4}, DType::kF32);
  const Tensor dev = gpu.alloc({2, 4}, DType::kBF16);
  EXPECT_THROW(gpu.swiglu(host, gpu.alloc({2, 2}, DType::kBF16)), Error);
  EXPECT_THROW(gpu.swiglu(dev, Tensor::zeros({2, 2}, DType::kBF16)), Error);
}

}  // namespace
}  // namespace inflight::test
