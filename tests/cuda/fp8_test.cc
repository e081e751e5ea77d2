// FP8 on the CUDA backend against the CPU's exact emulation (ops/quantize_fp8.h,
// ops/scaled_gemm.h): quantization bit for bit, the scaled GEMM through cuBLASLt and through the
// CUDA-core kernel in every scaling scheme over awkward shapes (m = 1..1024, k not a multiple of
// 128, n not a multiple of 16), and the FP8 GEMV at m <= 8.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

#include "core/fp8.h"
#include "cuda_test_util.h"
#include "ops/ops_cuda.cuh"

namespace inflight::test {
namespace {

using ActivationScales = Quantization::ActivationScales;

bool have_fp8() {
  if (cuda_backend().supports_fp8()) return true;
  std::printf("skipped: the GPU has no FP8 tensor cores\n");
  return false;
}

// A device copy of a host tensor's bytes (e4m3 values, f32 scales).
Tensor to_device_raw(const Tensor& host) {
  Tensor t = cuda_backend().alloc(host.shape(), host.dtype());
  EXPECT_EQ(cudaMemcpy(t.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  return t;
}

Tensor to_host_raw(const Tensor& dev) {
  cuda_backend().synchronize();
  Tensor t = Tensor::empty(dev.shape(), dev.dtype());
  EXPECT_EQ(cudaMemcpy(t.raw(), dev.raw(), dev.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  return t;
}

QuantizedActivations quantize_on(Backend& b, const Tensor& x, int64_t group,
                                 const Tensor* static_scale = nullptr) {
  const int64_t m = x.size(0), k = x.size(1);
  QuantizedActivations q{
      b.alloc({m, k}, DType::kF8E4M3),
      b.alloc(group == 0 ? Shape{m} : Shape{(k + group - 1) / group, m}, DType::kF32)};
  b.quantize_fp8(x, static_scale, group, q.values, q.scales);
  return q;
}

TEST(CudaFp8Test, QuantizeMatchesCpuBitForBit) {
  INFLIGHT_REQUIRE_CUDA();
  if (!have_fp8()) GTEST_SKIP();
  std::mt19937 rng(7);
  for (const int64_t group : {int64_t{0}, int64_t{128}}) {
    // Rows held in registers (k % 8 == 0, up to 32,768 columns) and the rest.
    for (const auto& [m, k] : {std::pair<int64_t, int64_t>{1, 4096},
                               {5, 592},
                               {300, 100},
                               {1030, 4096},
                               {2, 32768},
                               {2, 32776}}) {
      const Tensor x = random_host({m, k}, rng, -4.0f, 4.0f);  // bf16-exact
      const QuantizedActivations ref = quantize_on(cpu_backend(), x, group);
      const QuantizedActivations got =
          quantize_on(cuda_backend(), to_backend(cuda_backend(), x), group);
      const Tensor values = to_host_raw(got.values), scales = to_host_raw(got.scales);
      EXPECT_EQ(std::memcmp(values.raw(), ref.values.raw(), values.nbytes()), 0)
          << "values group " << group << " m " << m << " k " << k;
      EXPECT_EQ(std::memcmp(scales.raw(), ref.scales.raw(), scales.nbytes()), 0)
          << "scales group " << group << " m " << m << " k " << k;
    }
  }
  // A static scale: every row gets it, values saturate.
  const Tensor x = random_host({3, 64}, rng, -100.0f, 100.0f);
  Tensor s = Tensor::empty({1}, DType::kF32);
  s.data<float>()[0] = 0.125f;
  const QuantizedActivations ref = quantize_on(cpu_backend(), x, 0, &s);
  const Tensor s_dev = to_device_raw(s);
  const QuantizedActivations got =
      quantize_on(cuda_backend(), to_backend(cuda_backend(), x), 0, &s_dev);
  const Tensor values = to_host_raw(got.values);
  EXPECT_EQ(std::memcmp(values.raw(), ref.values.raw(), values.nbytes()), 0);
}

// A random e4m3 weight [n, k] with random positive scales of the scheme, on the host.
Linear host_weight(int64_t n, int64_t k, int scheme, std::mt19937& rng) {
  Linear w;
  w.weight = Tensor::empty({n, k}, DType::kF8E4M3);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f), scale(0.001f, 0.01f);
  auto* bytes = static_cast<uint8_t*>(w.weight.raw());
  for (int64_t e = 0; e < n * k; ++e) bytes[e] = f32_to_e4m3(value(rng) * 448.0f);
  Shape shape;
  switch (scheme) {
    case 0:
      shape = {1};
      w.activations = ActivationScales::kStaticTensor;
      break;  // per tensor
    case 1:
      shape = {n};
      break;  // per channel
    case 2:
      shape = {n};
      w.activations = ActivationScales::kStaticTensor;
      break;    // channel, static x
    default: {  // 128 x 128 blocks
      const int64_t groups = (k + 127) / 128;
      shape = {(n + 127) / 128, (groups + 3) / 4 * 4};
      w.block_rows = w.block_cols = 128;
      w.activations = ActivationScales::kDynamicGroup;
    }
  }
  w.scale = Tensor::empty(shape, DType::kF32);
  for (int64_t i = 0; i < w.scale.numel(); ++i) w.scale.data<float>()[i] = scale(rng);
  if (w.activations == ActivationScales::kStaticTensor) {
    w.input_scale = Tensor::empty({1}, DType::kF32);
    w.input_scale.data<float>()[0] = 0.02f;
  }
  return w;
}

// x quantized on the CPU as the scaled GEMM of `w` reads it.
QuantizedActivations quantize_for_test(const Tensor& x, const Linear& w) {
  const int64_t m = x.size(0), k = x.size(1);
  const int64_t groups = w.block_cols > 0 ? (k + w.block_cols - 1) / w.block_cols : 0;
  QuantizedActivations q{Tensor::empty({m, k}, DType::kF8E4M3),
                         Tensor::empty(groups > 0 ? Shape{groups, m} : Shape{m}, DType::kF32)};
  quantize_for(cpu_backend(), x, w, q);
  return q;
}

Linear to_device(const Linear& h) {
  Linear d = h;
  d.weight = to_device_raw(h.weight);
  d.scale = to_device_raw(h.scale);
  if (h.input_scale.defined()) d.input_scale = to_device_raw(h.input_scale);
  if (h.bias.defined()) d.bias = to_backend(cuda_backend(), h.bias);
  return d;
}

TEST(CudaFp8Test, ScaledGemmMatchesCpu) {
  INFLIGHT_REQUIRE_CUDA();
  if (!have_fp8()) GTEST_SKIP();
  std::mt19937 rng(13);
  const char* names[] = {"tensor", "channel", "channel_static", "block128"};
  for (int scheme = 0; scheme < 4; ++scheme) {
    for (const auto [n, k] :
         {std::pair<int64_t, int64_t>{512, 640}, {384, 592}, {1000, 1024}, {37, 200}}) {
      Linear hw = host_weight(n, k, scheme, rng);
      if (n == 384) hw.bias = random_host({n}, rng);
      const Linear dw = to_device(hw);
      for (const int64_t m : {1, 2, 3, 4, 5, 8, 16, 61, 256, 1024}) {
        const Tensor x = random_host({m, k}, rng, -2.0f, 2.0f);
        const QuantizedActivations qx_cpu = quantize_for_test(x, hw);
        const Tensor y_ref = Tensor::empty({m, n}, DType::kF32);
        cpu_backend().gemm(qx_cpu, hw, y_ref);
        // The same e4m3 activations on the GPU, so only the products' summation differs.
        const QuantizedActivations qx{to_device_raw(qx_cpu.values), to_device_raw(qx_cpu.scales)};
        for (const DType out : {DType::kBF16, DType::kF32}) {
          if (out == DType::kF32 && hw.bias.defined()) continue;  // bias has y's dtype
          const Tensor y = cuda_backend().alloc({m, n}, out);
          poison(y);
          cuda_backend().gemm(qx, dw, y);
          expect_close("scaled_gemm",
                       fmt::format("{} m={} n={} k={} {}", names[scheme], m, n, k, dtype_name(out)),
                       to_host(cuda_backend(), y), y_ref,
                       out == DType::kF32 ? 1e-3 : kBf16Tolerance);
          const Tensor y_core = cuda_backend().alloc({m, n}, out);
          poison(y_core);
          scaled_gemm_cuda(make_scaled_gemm_params(qx, dw, y_core), nullptr);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          expect_close("scaled_gemm_core",
                       fmt::format("{} m={} n={} k={} {}", names[scheme], m, n, k, dtype_name(out)),
                       to_host(cuda_backend(), y_core), y_ref,
                       out == DType::kF32 ? 1e-5 : kBf16Tolerance);
          // The FP8 GEMV, wherever it applies (m <= 8, no blocks, k % 16 == 0).
          const ScaledGemmParams gp = make_scaled_gemm_params(qx, dw, y_core);
          if (!scaled_gemv_cuda_supported(gp)) continue;
          poison(y_core);
          scaled_gemv_cuda(gp, nullptr);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          expect_close("scaled_gemv",
                       fmt::format("{} m={} n={} k={} {}", names[scheme], m, n, k, dtype_name(out)),
                       to_host(cuda_backend(), y_core), y_ref,
                       out == DType::kF32 ? 1e-5 : kBf16Tolerance);
        }
      }
    }
  }
}

// RMSNorm and SwiGLU that also quantize their output for the FP8 layer after them: the same
// bf16 output, residual, e4m3 values and scales, bit for bit, as the op followed by
// quantize_fp8, over the vectorised and scalar paths (dims not a multiple of 8, rows longer
// than the vector kernel holds), one row and many, and activations scaled per 128-column group
// (which the fused kernels leave to the two passes).
TEST(CudaFp8Test, NormAndSwigluQuantizeAsQuantizeFp8) {
  INFLIGHT_REQUIRE_CUDA();
  if (!have_fp8()) GTEST_SKIP();
  Backend& gpu = cuda_backend();
  std::mt19937 rng(29);
  const auto same = [](const Tensor& a, const Tensor& b, const std::string& what) {
    const Tensor ha = to_host_raw(a), hb = to_host_raw(b);
    EXPECT_EQ(std::memcmp(ha.raw(), hb.raw(), ha.nbytes()), 0) << what;
  };
  const auto quantized = [&](int64_t m, int64_t k, int64_t group) {
    return QuantizedActivations{
        gpu.alloc({m, k}, DType::kF8E4M3),
        gpu.alloc(group == 0 ? Shape{m} : Shape{(k + group - 1) / group, m}, DType::kF32)};
  };
  for (const int64_t group : {int64_t{0}, int64_t{128}}) {
    Linear w;
    w.activations = group == 0 ? ActivationScales::kDynamicToken : ActivationScales::kDynamicGroup;
    w.block_cols = group;
    for (const auto& [m, k] : {std::pair<int64_t, int64_t>{1, 4096},
                               {3, 576},
                               {130, 4096},
                               {2, 100},
                               {4, 8200},
                               {1, 14336}}) {
      for (const bool with_add : {false, true}) {
        const std::string what =
            fmt::format("rms_norm m={} k={} group={} add={}", m, k, group, with_add);
        const Tensor residual_host = random_host({m, k}, rng, -3.0f, 3.0f);
        const Tensor add = to_backend(gpu, random_host({m, k}, rng, -1.0f, 1.0f));
        const Tensor weight = to_backend(gpu, random_host({k}, rng, 0.5f, 1.5f));
        const Tensor r1 = to_backend(gpu, residual_host), r2 = to_backend(gpu, residual_host);
        const Tensor out1 = gpu.alloc({m, k}, DType::kBF16), out2 = gpu.alloc({m, k}, DType::kBF16);
        const QuantizedActivations q1 = quantized(m, k, group), q2 = quantized(m, k, group);
        gpu.rms_norm_quantized(with_add ? &add : nullptr, r1, weight, 1e-5f, out1, w, q1);
        gpu.rms_norm(with_add ? &add : nullptr, r2, weight, 1e-5f, out2);
        quantize_for(gpu, out2, w, q2);
        same(r1, r2, what + ": residual");  // out1 is scratch (Backend::rms_norm_quantized)
        same(q1.values, q2.values, what + ": e4m3 values");
        same(q1.scales, q2.scales, what + ": scales");
      }
    }
    for (const auto [m, inter] : {std::pair<int64_t, int64_t>{1, 14336},
                                  {5, 768},
                                  {129, 1536},
                                  {3, 100},
                                  {2, 20000},
                                  {1, 32768},
                                  {2, 32776}}) {
      const std::string what = fmt::format("swiglu m={} inter={} group={}", m, inter, group);
      const Tensor gate_up = to_backend(gpu, random_host({m, 2 * inter}, rng, -4.0f, 4.0f));
      const Tensor out1 = gpu.alloc({m, inter}, DType::kBF16);
      const Tensor out2 = gpu.alloc({m, inter}, DType::kBF16);
      const QuantizedActivations q1 = quantized(m, inter, group), q2 = quantized(m, inter, group);
      gpu.swiglu_quantized(gate_up, out1, w, q1);
      gpu.swiglu(gate_up, out2);
      quantize_for(gpu, out2, w, q2);
      same(q1.values, q2.values, what + ": e4m3 values");
      same(q1.scales, q2.scales, what + ": scales");
    }
  }
}

}  // namespace
}  // namespace inflight::test
