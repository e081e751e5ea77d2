// fill_random: deterministic pseudo-random values for dummy weights and tests, identical on
// every backend. Element i of a fill with `seed` is
//   value(i) = f32(offset + scale * u(seed, i)),   u in [-1, 1) on a grid of 2^-23
// where u comes from a counter-based hash (splitmix64 of seed and i): every element is computed
// independently (one GPU thread each, no state), and the CPU reference produces the same f32
// value bit for bit (the CUDA backend then rounds it to bf16 once). The arithmetic is done in
// double, where the product of two floats is exact, so fused or separate multiply-add (which
// compilers choose freely) give the same sum on the host and the device.
//
// Dummy weights use scale ~ 1/sqrt(fan_in) (offset 0) for linear layers and offset 1 with a
// small scale for norm weights, so activations stay finite through many layers.
#pragma once

#include <cstdint>

#include "core/hash.h"
#include "core/tensor.h"

namespace inflight {

struct FillRandomParams {
  void* data = nullptr;  // [numel] contiguous
  int64_t numel = 0;
  DType dtype = DType::kF32;
  uint64_t seed = 0;
  float scale = 1.0f;
  float offset = 0.0f;
  // Element i takes the value of element first + (i / cols) * whole_cols + i % cols of a larger
  // tensor (cols 0: first + i).
  int64_t first = 0;
  int64_t cols = 0;
  int64_t whole_cols = 0;
};

// u(seed, i) in [-1, 1): 24 random bits scaled by 2^-23, exact in f32.
INFLIGHT_HOST_DEVICE float fill_random_unit(uint64_t seed, int64_t i) {
  const uint64_t h = splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(i));
  return static_cast<float>(static_cast<int32_t>(h >> 40)) * 0x1.0p-23f - 1.0f;
}

INFLIGHT_HOST_DEVICE float fill_random_value(const FillRandomParams& p, int64_t i) {
  const int64_t j = p.cols > 0 ? p.first + i / p.cols * p.whole_cols + i % p.cols : p.first + i;
  const double v = static_cast<double>(p.scale) * static_cast<double>(fill_random_unit(p.seed, j)) +
                   static_cast<double>(p.offset);
  return static_cast<float>(v);
}

// Validates: t defined, contiguous float tensor; scale and offset finite; a window (cols > 0)
// dividing t into rows no wider than the whole's.
FillRandomParams make_fill_random_params(const Tensor& t, uint64_t seed, float scale, float offset,
                                         int64_t first = 0, int64_t cols = 0,
                                         int64_t whole_cols = 0);

// f32 only; multithreaded.
void fill_random_cpu(const FillRandomParams& p);

}  // namespace inflight
