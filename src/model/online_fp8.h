// Online FP8: an unquantized weight quantized at load (`--quantization fp8-*`,
// formats/quantization.h) into the e4m3 layout an FP8 checkpoint stores, so the loader treats it
// as it treats such a checkpoint (linear_loader.h: fused parts, scale layouts, checks).
//
// For a weight w [rows, cols] and the scheme's scale granularity (one scale per tensor, per row,
// or per block_rows x block_cols block; edge blocks are partial):
//   scale(b)  = amax(|w| over block b) / 448        (1 for an all-zero block)
//   value[i]  = e4m3(w[i] * (1 / scale(b)))         rounded to nearest even, saturating at +-448
// the rule ops/quantize_fp8.h applies to activations, so the CPU backend and CUDA produce the
// same bytes from the same weights. Dequantised, value[i] * scale(b) is within half an e4m3 ulp
// of w[i] (2^-4 of |w[i]|, or 2^-10 scale(b) among subnormals).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "formats/quantization.h"
#include "formats/stored_tensor.h"

namespace inflight {

// How an online FP8 weight is scaled (from a Quantization with source "online").
struct OnlineFp8Scheme {
  Quantization::WeightScales weights = Quantization::WeightScales::kChannel;
  int64_t block_rows = 0;  // kBlock only
  int64_t block_cols = 0;

  static OnlineFp8Scheme of(const Quantization& q) {
    return {q.weights, q.block_rows, q.block_cols};
  }
};

// `w` (host f32 [rows, cols]) quantized as above into a StoredTensor of type kF8E4M3 that owns
// its bytes, named `name`, with its f32 `scale` tensor: [1] (per tensor), [rows] (per channel) or
// [ceil(rows / block_rows), ceil(cols / block_cols)] with block_rows/block_cols set (blocks).
// Throws Error(kInvalidArgument) for a tensor that is not host f32 2-D or a block scheme
// without a positive block shape.
StoredTensor quantize_weight_e4m3(std::string name, const Tensor& w, const OnlineFp8Scheme& scheme);

}  // namespace inflight
