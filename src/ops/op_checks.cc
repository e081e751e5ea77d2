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

PagedKv make_paged_kv(std::string_view op, const KvCacheLayer& kv, DType compute, Device device) {
  INFLIGHT_CHECK_CODE(kv.key.defined(), ErrorCode::kInvalidArgument, "{}: k_cache is undefined",
                      op);
  const DType dt = kv.key.dtype();
  const bool fp8 = dt == DType::kF8E4M3;
  INFLIGHT_CHECK_CODE(fp8 || dt == compute, ErrorCode::kInvalidArgument,
                      "{}: the KV cache holds {}, expected {} or e4m3", op, dtype_name(dt),
                      dtype_name(compute));
  check_tensor_kind(op, "k_cache", kv.key, dt, device, 4);
  const Shape& shape = kv.key.shape();
  check_tensor(op, "v_cache", kv.value, dt, device, shape);
  PagedKv p;
  if (fp8) {
    const Shape scales = {shape[0], shape[1], shape[2]};
    check_tensor(op, "k_scales", kv.key_scales, DType::kF32, device, scales);
    check_tensor(op, "v_scales", kv.value_scales, DType::kF32, device, scales);
    p.k_scales = kv.key_scales.data<float>();
    p.v_scales = kv.value_scales.data<float>();
  } else {
    INFLIGHT_CHECK_CODE(!kv.key_scales.defined() && !kv.value_scales.defined(),
                        ErrorCode::kInvalidArgument, "{}: a {} KV cache has no scales", op,
                        dtype_name(dt));
  }
  p.k = kv.key.raw();
  p.v = kv.value.raw();
  p.dtype = dt;
  p.num_blocks = shape[0];
  p.block_size = static_cast<int32_t>(shape[1]);
  p.num_kv_heads = static_cast<int32_t>(shape[2]);
  p.head_dim = static_cast<int32_t>(shape[3]);
  return p;
}

}  // namespace inflight
