#include "ops/rope_kv_write.h"

#include "ops/op_checks.h"

namespace inflight {

RopeKvWriteParams make_rope_kv_write_params(const Tensor& qkv, const Tensor& positions,
                                            const Tensor& slot_mapping, const Tensor& inv_freq,
                                            const Tensor& q_out, const KvCacheLayer& kv) {
  constexpr const char* kOp = "rope_kv_write";
  INFLIGHT_CHECK_CODE(qkv.defined() && is_float_dtype(qkv.dtype()), ErrorCode::kInvalidArgument,
                      "{}: qkv must be a float tensor", kOp);
  const DType dt = qkv.dtype();
  const Device dev = qkv.device();
  check_tensor_kind(kOp, "qkv", qkv, dt, dev, 2);
  check_tensor_kind(kOp, "q_out", q_out, dt, dev, 3);
  RopeKvWriteParams p;
  p.kv = make_paged_kv(kOp, kv, dt, dev);
  const int64_t num_tokens = qkv.size(0);
  const int64_t num_heads = q_out.size(1), head_dim = q_out.size(2);
  const int64_t num_kv_heads = p.kv.num_kv_heads;
  INFLIGHT_CHECK_CODE(head_dim > 0 && head_dim % 2 == 0, ErrorCode::kInvalidArgument,
                      "{}: head_dim must be even and positive, got {}", kOp, head_dim);
  INFLIGHT_CHECK_CODE(
      num_kv_heads > 0 && num_heads % num_kv_heads == 0, ErrorCode::kInvalidArgument,
      "{}: {} query heads are not a multiple of {} kv heads", kOp, num_heads, num_kv_heads);
  check_tensor(kOp, "q_out", q_out, dt, dev, {num_tokens, num_heads, head_dim});
  check_tensor(kOp, "qkv", qkv, dt, dev, {num_tokens, (num_heads + 2 * num_kv_heads) * head_dim});
  INFLIGHT_CHECK_CODE(p.kv.head_dim == head_dim, ErrorCode::kInvalidArgument,
                      "{}: the cache's head_dim {} is not q's {}", kOp, p.kv.head_dim, head_dim);
  check_tensor(kOp, "positions", positions, DType::kI32, dev, {num_tokens});
  check_tensor(kOp, "slot_mapping", slot_mapping, DType::kI64, dev, {num_tokens});
  check_tensor(kOp, "inv_freq", inv_freq, DType::kF32, dev, {head_dim / 2});
  p.qkv = qkv.raw();
  p.q_out = q_out.raw();
  p.positions = positions.data<int32_t>();
  p.slot_mapping = slot_mapping.data<int64_t>();
  p.inv_freq = inv_freq.data<float>();
  p.num_tokens = num_tokens;
  p.num_heads = static_cast<int32_t>(num_heads);
  p.dtype = dt;
  return p;
}

}  // namespace inflight
