// qk_norm: the per-head RMSNorm of queries and keys (Qwen3), in place on the fused q/k/v
// projection output before RoPE:
//
//   qkv [T, (H + 2 KH) D] = [q heads 0..H-1 | k heads 0..KH-1 | v heads 0..KH-1] per token
//   q[t, h] <- q[t, h] * rsqrt(mean(q[t, h]^2) + eps) * q_weight      (each of the H heads)
//   k[t, h] <- k[t, h] * rsqrt(mean(k[t, h]^2) + eps) * k_weight      (each of the KH heads)
//
// v is left alone. Each head of D elements is normalised on its own, with one weight vector [D]
// shared by all q heads and one by all k heads.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace inflight {

struct QkNormParams {
  void* qkv = nullptr;             // [tokens, (num_heads + 2 num_kv_heads) head_dim], in place
  const void* q_weight = nullptr;  // [head_dim]
  const void* k_weight = nullptr;  // [head_dim]
  int64_t tokens = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  float eps = 1e-6f;
  DType dtype = DType::kF32;
};

// Validates qkv [T, (H + 2 KH) D] (float), q_weight and k_weight [D] of qkv's dtype and device,
// H, KH, D > 0, eps > 0.
QkNormParams make_qk_norm_params(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads,
                                 const Tensor& q_weight, const Tensor& k_weight, float eps);

// f32 only; statistics accumulate in double per head.
void qk_norm_cpu(const QkNormParams& p);

}  // namespace inflight
