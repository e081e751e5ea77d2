#include "model/online_fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/check.h"
#include "core/fp8.h"
#include "core/thread_pool.h"

namespace inflight {

StoredTensor quantize_weight_e4m3(std::string name, const Tensor& w,
                                  const OnlineFp8Scheme& scheme) {
  using WeightScales = Quantization::WeightScales;
  INFLIGHT_CHECK_CODE(w.defined() && w.device() == Device::kCpu && w.dtype() == DType::kF32 &&
                          w.dim() == 2,
                      ErrorCode::kInvalidArgument,
                      "online fp8: weight '{}' must be a host f32 matrix, got {} {}", name,
                      w.defined() ? dtype_name(w.dtype()) : "undefined",
                      w.defined() ? shape_str(w.shape()) : "");
  const int64_t rows = w.size(0), cols = w.size(1);
  // The block every scale covers: the whole tensor, one row, or block_rows x block_cols.
  int64_t br = std::max<int64_t>(rows, 1), bc = std::max<int64_t>(cols, 1);
  if (scheme.weights == WeightScales::kChannel) br = 1;
  if (scheme.weights == WeightScales::kBlock) {
    INFLIGHT_CHECK_CODE(scheme.block_rows > 0 && scheme.block_cols > 0,
                        ErrorCode::kInvalidArgument,
                        "online fp8: block scaling of '{}' needs a block shape, got {} x {}", name,
                        scheme.block_rows, scheme.block_cols);
    br = scheme.block_rows;
    bc = scheme.block_cols;
  }
  const int64_t block_rows_n = (rows + br - 1) / br, block_cols_n = (cols + bc - 1) / bc;

  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * cols));
  Tensor scales = Tensor::empty({block_rows_n, block_cols_n}, DType::kF32);
  const float* src = w.data<float>();
  uint8_t* dst = bytes->data();
  float* sc = scales.data<float>();
  // One task per row of blocks: each writes only its own rows and scales.
  ThreadPool::global().parallel_for(block_rows_n, [&](int64_t begin, int64_t end) {
    for (int64_t bi = begin; bi < end; ++bi) {
      const int64_t r0 = bi * br, r1 = std::min(rows, r0 + br);
      for (int64_t bj = 0; bj < block_cols_n; ++bj) {
        const int64_t c0 = bj * bc, c1 = std::min(cols, c0 + bc);
        float amax = 0.0f;
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(src[r * cols + c]));
        }
        const float scale = amax > 0.0f ? amax / kE4M3Max : 1.0f;
        const float inv = 1.0f / scale;
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t c = c0; c < c1; ++c) dst[r * cols + c] = f32_to_e4m3(src[r * cols + c] * inv);
        }
        sc[bi * block_cols_n + bj] = scale;
      }
    }
  });

  StoredTensor out;
  out.shape = {rows, cols};
  out.type = StoredType::kF8E4M3;
  out.data = bytes->data();
  out.owner = bytes;
  Shape scale_shape = {block_rows_n, block_cols_n};
  if (scheme.weights == WeightScales::kTensor) scale_shape = {1};
  if (scheme.weights == WeightScales::kChannel) scale_shape = {rows};
  if (scheme.weights == WeightScales::kBlock) {
    out.block_rows = br;
    out.block_cols = bc;
  }
  out.scale = std::make_shared<StoredTensor>(
      StoredTensor::from_host(name + ".weight_scale", scales.reshape(scale_shape)));
  out.name = std::move(name);
  return out;
}

}  // namespace inflight
