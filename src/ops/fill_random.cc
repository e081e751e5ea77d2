#include "ops/fill_random.h"

#include <cmath>

#include "ops/op_checks.h"

namespace inflight {

FillRandomParams make_fill_random_params(const Tensor& t, uint64_t seed, float scale, float offset,
                                         int64_t first, int64_t cols, int64_t whole_cols) {
  INFLIGHT_CHECK_CODE(t.defined() && is_float_dtype(t.dtype()), ErrorCode::kInvalidArgument,
                      "fill_random: the tensor must be a defined float tensor");
  INFLIGHT_CHECK_CODE(std::isfinite(scale) && std::isfinite(offset), ErrorCode::kInvalidArgument,
                      "fill_random: scale {} and offset {} must be finite", scale, offset);
  FillRandomParams p;
  p.data = t.raw();
  p.numel = t.numel();
  p.dtype = t.dtype();
  p.seed = seed;
  p.scale = scale;
  p.offset = offset;
  INFLIGHT_CHECK_CODE(
      first >= 0 && (cols == 0 || (cols > 0 && cols <= whole_cols && t.numel() % cols == 0)),
      ErrorCode::kInvalidArgument,
      "fill_random: a window of {} columns of {} from element {} over {} elements", cols,
      whole_cols, first, t.numel());
  p.first = first;
  p.cols = cols;
  p.whole_cols = whole_cols;
  return p;
}

}  // namespace inflight
