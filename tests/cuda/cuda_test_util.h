// Helpers of the CUDA backend tests: the shared backends, bf16-exact random inputs, poisoning,
// and the comparison against the CPU reference with a per-op summary printed at the end.
//
// Every test starts with INFLIGHT_REQUIRE_CUDA(): without a device (CI builds these tests with
// nvcc on machines without a GPU) it prints "skipped: no CUDA device" and skips.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "runtime/backend.h"

#define INFLIGHT_REQUIRE_CUDA()                  \
  do {                                           \
    if (!::inflight::cuda_device_available()) {  \
      std::printf("skipped: no CUDA device\n");  \
      GTEST_SKIP() << "skipped: no CUDA device"; \
    }                                            \
  } while (0)

namespace inflight::test {

// Bars of the guide: bf16 GPU against the fp32 reference.
constexpr double kBf16Tolerance = 2e-2;
// FP8 (W8A8, or an e4m3 KV cache) GPU against the CPU's exact emulation: the same e4m3
// weights, activations (or k and v) quantized from bf16 on one side and f32 on the other: about
// 1 element in 30 rounds to the neighbouring e4m3 value (1/16 to 1/8 away), 1-2% per GEMM,
// compounding through a tiny random model whose logits are nearly flat (measured on an H100
// over five tiny architectures: worst logits row rel_l2 1.21e-1, rel_max 1.63e-1 for W8A8 with
// the FP8 GEMV at decode; 4.5e-2 for the KV cache). A scale on the wrong rows, blocks or tokens
// is off by O(1).
constexpr double kFp8Tolerance = 2e-1;

// One process-wide backend of each kind (creating a CUDA backend costs a cuBLASLt handle).
Backend& cuda_backend();
Backend& cpu_backend();

// A host f32 tensor of values drawn uniformly from [lo, hi) and rounded to bf16, so that the
// CPU (f32) and the CUDA (bf16) backends see exactly the same inputs.
Tensor random_host(const Shape& shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f);

// The same host tensor on `backend` in its compute dtype.
Tensor to_backend(Backend& backend, const Tensor& host_f32);

// A host f32 copy of a device (or CPU) tensor, after the backend's work so far.
Tensor to_host(Backend& backend, const Tensor& t);

// Fills a CUDA tensor with 0xFF bytes (NaN as bf16 and f32) so that unwritten outputs show.
void poison(const Tensor& cuda_tensor);

struct ErrorStats {
  double rel_l2 = 0.0;     // ||got - ref|| / ||ref||
  double rel_max = 0.0;    // max |got - ref| / max |ref|
  double max_abs = 0.0;    // max |got - ref|
  int64_t non_finite = 0;  // NaN or inf in got where ref is finite
  int64_t count = 0;
  std::string str() const;
};

ErrorStats compare(const Tensor& got, const Tensor& ref);

// Compares, records the case for the summary table under `op`, and adds a gtest failure naming
// `what` unless got is finite wherever ref is and both errors are below `tolerance`.
ErrorStats expect_close(const std::string& op, const std::string& what, const Tensor& got,
                        const Tensor& ref, double tolerance = kBf16Tolerance);

// Adds one row to the summary table without comparing (e.g. greedy-token agreement).
void record(const std::string& op, const std::string& what, const ErrorStats& stats, bool ok);

}  // namespace inflight::test
