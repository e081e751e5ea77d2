#include "model/online_fp8.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "core/check.h"
#include "core/fp8.h"
#include "core/thread_pool.h"

namespace inflight {

StoredTensor quantize_weight_e4m3(std::string name, const Tensor& w,
                                  const OnlineFp8Scheme& scheme) {
  using WeightScales = Quantization::WeightScales;
  INFLIGHT_CHECK_CODE(
      w.defined() && w.device() == Device::kCpu && w.dtype() == DType::kF32 && w.dim() == 2,
      ErrorCode::kInvalidArgument, "online fp8: weight '{}' must be a host f32 matrix, got {} {}",
      name, w.defined() ? dtype_name(w.dtype()) : "undefined",
      w.defined() ? shape_str(w.shape()) : "");
  const int64_t rows = w.size(0), cols = w.size(1);
  // The block every scale covers: the whole tensor, one row, or block_rows x block_cols.
  int64_t br = std::max<int64_t>(rows, 1), bc = std::max<int64_t>(cols, 1);
  if (scheme.weights == WeightScales::kChannel) br = 1;
  if (scheme.weights == WeightScales::kBlock) {
    INFLIGHT_CHECK_CODE(scheme.block_rows > 0 && scheme.block_cols > 0, ErrorCode::kInvalidArgument,
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
  // Row by row on the thread pool (one tensor-wide block must not run on one thread): each row's
  // amax per column block, then each block's scale, then the values with their block's scale.
  std::vector<float> row_amax(static_cast<size_t>(rows * block_cols_n), 0.0f);
  auto by_rows = [&](const std::function<void(int64_t)>& fn) {
    ThreadPool::global().parallel_for(
        rows,
        [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) fn(r);
        },
        /*min_chunk=*/std::max<int64_t>(1, 4096 / std::max<int64_t>(1, cols)));
  };
  by_rows([&](int64_t r) {
    for (int64_t c = 0; c < cols; ++c) {
      float& a = row_amax[static_cast<size_t>(r * block_cols_n + c / bc)];
      a = std::max(a, std::fabs(src[r * cols + c]));
    }
  });
  for (int64_t bi = 0; bi < block_rows_n; ++bi) {
    for (int64_t bj = 0; bj < block_cols_n; ++bj) {
      float amax = 0.0f;
      for (int64_t r = bi * br; r < std::min(rows, (bi + 1) * br); ++r) {
        amax = std::max(amax, row_amax[static_cast<size_t>(r * block_cols_n + bj)]);
      }
      sc[bi * block_cols_n + bj] = amax > 0.0f ? amax / kE4M3Max : 1.0f;
    }
  }
  by_rows([&](int64_t r) {
    const float* scale_row = sc + (r / br) * block_cols_n;
    for (int64_t bj = 0; bj < block_cols_n; ++bj) {
      const float inv = 1.0f / scale_row[bj];
      for (int64_t c = bj * bc; c < std::min(cols, (bj + 1) * bc); ++c) {
        dst[r * cols + c] = f32_to_e4m3(src[r * cols + c] * inv);
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
