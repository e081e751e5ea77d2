#include "ops/swiglu.h"

#include "ops/op_checks.h"

namespace inflight {

SwigluParams make_swiglu_params(const Tensor& gate_up, const Tensor& out) {
  constexpr const char* kOp = "swiglu";
  INFLIGHT_CHECK_CODE(gate_up.defined() && is_float_dtype(gate_up.dtype()),
                      ErrorCode::kInvalidArgument, "{}: gate_up must be a float tensor", kOp);
  check_tensor_kind(kOp, "gate_up", gate_up, gate_up.dtype(), gate_up.device(), 2);
  INFLIGHT_CHECK_CODE(gate_up.size(1) % 2 == 0, ErrorCode::kInvalidArgument,
                      "{}: gate_up {} must have an even number of columns ([gate; up])", kOp,
                      shape_str(gate_up.shape()));
  const int64_t rows = gate_up.size(0), inter = gate_up.size(1) / 2;
  check_tensor(kOp, "out", out, gate_up.dtype(), gate_up.device(), {rows, inter});
  SwigluParams p;
  p.gate_up = gate_up.raw();
  p.out = out.raw();
  p.rows = rows;
  p.inter = inter;
  p.dtype = gate_up.dtype();
  return p;
}

}  // namespace inflight
