// clamp: x <- min(max(x, -limit), limit) in place. MPT's clip_qkv on the fused q/k/v projection.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace inflight {

struct ClampParams {
  void* x = nullptr;
  int64_t numel = 0;
  float limit = 0.0f;
  DType dtype = DType::kF32;
};

// Validates x (float, contiguous) and limit > 0 (finite).
ClampParams make_clamp_params(const Tensor& x, float limit);

// f32 only.
void clamp_cpu(const ClampParams& p);

}  // namespace inflight
