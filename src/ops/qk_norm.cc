#include "ops/qk_norm.h"

#include "ops/op_checks.h"

namespace inflight {

QkNormParams make_qk_norm_params(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads,
                                 const Tensor& q_weight, const Tensor& k_weight, float eps) {
  constexpr const char* kOp = "qk_norm";
  INFLIGHT_CHECK_CODE(qkv.defined() && is_float_dtype(qkv.dtype()), ErrorCode::kInvalidArgument,
                      "{}: qkv must be a float tensor", kOp);
  check_tensor_kind(kOp, "qkv", qkv, qkv.dtype(), qkv.device(), 2);
  INFLIGHT_CHECK_CODE(num_heads > 0 && num_kv_heads > 0, ErrorCode::kInvalidArgument,
                      "{}: {} heads and {} kv heads", kOp, num_heads, num_kv_heads);
  INFLIGHT_CHECK_CODE(q_weight.defined() && q_weight.dim() == 1 && q_weight.size(0) > 0,
                      ErrorCode::kInvalidArgument, "{}: q_weight must be [head_dim]", kOp);
  const int64_t head_dim = q_weight.size(0);
  check_tensor(kOp, "q_weight", q_weight, qkv.dtype(), qkv.device(), {head_dim});
  check_tensor(kOp, "k_weight", k_weight, qkv.dtype(), qkv.device(), {head_dim});
  INFLIGHT_CHECK_CODE(qkv.size(1) == (num_heads + 2 * num_kv_heads) * head_dim,
                      ErrorCode::kInvalidArgument,
                      "{}: qkv {} must have (H {} + 2 KH {}) x D {} columns", kOp,
                      shape_str(qkv.shape()), num_heads, num_kv_heads, head_dim);
  INFLIGHT_CHECK_CODE(eps > 0.0f, ErrorCode::kInvalidArgument, "{}: eps must be > 0, got {}", kOp,
                      eps);
  QkNormParams p;
  p.qkv = qkv.raw();
  p.q_weight = q_weight.raw();
  p.k_weight = k_weight.raw();
  p.tokens = qkv.size(0);
  p.num_heads = num_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.eps = eps;
  p.dtype = qkv.dtype();
  return p;
}

}  // namespace inflight
