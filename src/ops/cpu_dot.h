// dot: a . b over n f32 elements for the CPU reference kernels, with kLanes independent partial
// sums (vectorisable without reassociation) summed in a fixed tree, then the tail: the same
// order for every caller, so results depend on n only.
#pragma once

#include <cstdint>

#include "ops/cpu_dispatch.h"

namespace inflight {

INFLIGHT_CPU_INLINE float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  constexpr int kLanes = 8;
  float acc[kLanes] = {};
  const int64_t n_vec = n / kLanes * kLanes;
  for (int64_t i = 0; i < n_vec; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float tail = 0.0f;
  for (int64_t i = n_vec; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

}  // namespace inflight
