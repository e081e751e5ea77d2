#include "ops/op_checks.h"

namespace inflight {

void check_tensor_kind(std::string_view op, std::string_view arg, const Tensor& t, DType dtype,
                       Device device, int64_t dims) {
  INFLIGHT_CHECK_CODE(t.defined(), ErrorCode::kInvalidArgument, "{}: argument '{}' is missing", op,
                      arg);
  INFLIGHT_CHECK_CODE(t.device() == device, ErrorCode::kInvalidArgument,
                      "{}: '{}' lives on {}, expected {}", op, arg, device_str(t.device()),
                      device_str(device));
  INFLIGHT_CHECK_CODE(t.dtype() == dtype, ErrorCode::kInvalidArgument,
                      "{}: '{}' has dtype {}, expected {}", op, arg, dtype_name(t.dtype()),
                      dtype_name(dtype));
  INFLIGHT_CHECK_CODE(t.dim() == dims, ErrorCode::kInvalidArgument,
                      "{}: '{}' has shape {}, expected {} dimensions", op, arg,
                      shape_str(t.shape()), dims);
}

void check_tensor(std::string_view op, std::string_view arg, const Tensor& t, DType dtype,
                  Device device, const Shape& shape) {
  check_tensor_kind(op, arg, t, dtype, device, static_cast<int64_t>(shape.size()));
  INFLIGHT_CHECK_CODE(t.shape() == shape, ErrorCode::kInvalidArgument,
                      "{}: '{}' has shape {}, expected {}", op, arg, shape_str(t.shape()),
                      shape_str(shape));
}

bool is_float_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

}  // namespace inflight
