// gemm: the linear layer, y = x w^T (+ bias), with weights in the [out, in] layout of
// PyTorch/Hugging Face checkpoints.
//
//   x [m, k]   activations (tokens x in-features)
//   w [n, k]   weight (out-features x in-features)
//   bias [n]   optional
//   y [m, n]   the operands' dtype, or f32 for bf16/f16 operands (the LM head: logits are
//              not rounded to bf16, so greedy argmax ties are not created by the output type)
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace inflight {

struct GemmParams {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;  // null: no bias
  void* y = nullptr;           // must not alias x or w
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  DType dtype = DType::kF32;    // of x, w and bias
  DType y_dtype = DType::kF32;  // dtype, or f32
};

// Validates the shapes above (same float dtype and device for x, w, bias; y of that dtype or
// f32; k >= 1) and that y does not alias x or w.
GemmParams make_gemm_params(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y);

// f32 only. Cache-blocked over weight rows, multithreaded over n.
// NOTE: each y[i, j] is reduced in an order that depends only on k, never on m or on which
// tile it falls in, so a token's output is bitwise independent of the rest of the batch.
void gemm_cpu(const GemmParams& p);

}  // namespace inflight
