// Shared argument checks for the params builders (make_<op>_params): every op validates shapes,
// dtypes and devices once, where it is launched, so the kernels themselves can assume.
#pragma once

#include <string_view>

#include "core/tensor.h"
#include "ops/paged_kv.h"
#include "runtime/kv_cache_layer.h"

namespace inflight {

// Throws Error(kInvalidArgument) naming the op and the argument unless `t` is defined, lives on
// `device`, has `dtype` and exactly `shape`.
void check_tensor(std::string_view op, std::string_view arg, const Tensor& t, DType dtype,
                  Device device, const Shape& shape);

// Throws Error(kInvalidArgument) unless `t` is defined, lives on `device` and has `dtype`, with
// `dims` dimensions; returns nothing: callers read the sizes they need afterwards.
void check_tensor_kind(std::string_view op, std::string_view arg, const Tensor& t, DType dtype,
                       Device device, int64_t dims);

// Throws Error(kInvalidArgument) naming `op` unless the KV-cache layer has the shapes of
// runtime/kv_cache_layer.h, lives on `device`, and holds `compute` or e4m3 (then with both
// scale tensors). Returns the view with its caches, scales, dtype and sizes (block_tables unset).
PagedKv make_paged_kv(std::string_view op, const KvCacheLayer& kv, DType compute, Device device);

// The element types every compute op accepts for activations and weights.
bool is_float_dtype(DType dtype);

}  // namespace inflight
