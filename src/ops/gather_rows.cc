#include "ops/gather_rows.h"

#include "ops/op_checks.h"

namespace inflight {

GatherRowsParams make_gather_rows_params(const Tensor& src, const Tensor& indices,
                                         const Tensor& dst, int64_t first_index) {
  constexpr const char* kOp = "gather_rows";
  INFLIGHT_CHECK_CODE(src.defined() && is_float_dtype(src.dtype()), ErrorCode::kInvalidArgument,
                      "{}: src must be a float tensor", kOp);
  check_tensor_kind(kOp, "src", src, src.dtype(), src.device(), 2);
  check_tensor_kind(kOp, "indices", indices, DType::kI32, src.device(), 1);
  check_tensor(kOp, "dst", dst, src.dtype(), src.device(), {indices.size(0), src.size(1)});
  GatherRowsParams p;
  p.src = src.raw();
  p.indices = indices.data<int32_t>();
  p.dst = dst.raw();
  p.num_rows = indices.size(0);
  p.cols = src.size(1);
  p.src_rows = src.size(0);
  p.first_index = first_index;
  p.dtype = src.dtype();
  return p;
}

}  // namespace inflight
