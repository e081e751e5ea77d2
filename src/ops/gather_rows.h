// gather_rows: dst[i, :] = src[indices[i] - first_index, :], zeros for an index outside the
// rows of src. Serves the embedding lookup (src = the token embedding table, or under tensor
// parallelism one rank's rows of it: the ranks' outputs add up to the whole lookup, indices =
// token ids) and the pick of the rows whose logits are wanted
// (indices = logits_indices).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace inflight {

struct GatherRowsParams {
  const void* src = nullptr;         // [src_rows, cols]
  const int32_t* indices = nullptr;  // [num_rows], each in [0, src_rows)
  void* dst = nullptr;               // [num_rows, cols]
  int64_t num_rows = 0;
  int64_t cols = 0;
  int64_t src_rows = 0;
  int64_t first_index = 0;  // src row r holds index first_index + r; others gather zeros
  DType dtype = DType::kF32;
};

// Validates: src [R, C] float, indices [N] i32, dst [N, C] of src's dtype, all on src's device.
// NOTE: index values live on the device and are not checked here; callers check ids on the
// host (the model checks token ids against the vocabulary before upload).
GatherRowsParams make_gather_rows_params(const Tensor& src, const Tensor& indices,
                                         const Tensor& dst, int64_t first_index = 0);

// f32 only.
void gather_rows_cpu(const GatherRowsParams& p);

}  // namespace inflight
