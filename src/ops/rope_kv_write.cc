#include "ops/rope_kv_write.h"

#include "ops/op_checks.h"

namespace inflight {

RopeKvWriteParams make_rope_kv_write_params(const Tensor& qkv, const Tensor& positions,
                                            const Tensor& slot_mapping, const Tensor& inv_freq,
                                            const Tensor& q_out, const Tensor& k_cache,
                                            const Tensor& v_cache) {
  constexpr const char* kOp = "rope_kv_write";
  INFLIGHT_CHECK_CODE(qkv.defined() && is_float_dtype(qkv.dtype()), ErrorCode::kInvalidArgument,
                      "{}: qkv must be a float tensor", kOp);
  const DType dt = qkv.dtype();
  const Device dev = qkv.device();
  check_tensor_kind(kOp, "qkv", qkv, dt, dev, 2);
  check_tensor_kind(kOp, "q_out", q_out, dt, dev, 3);
  check_tensor_kind(kOp, "k_cache", k_cache, dt, dev, 4);
  const int64_t num_tokens = qkv.size(0);
  const int64_t num_heads = q_out.size(1), head_dim = q_out.size(2);
  const int64_t num_blocks = k_cache.size(0), block_size = k_cache.size(1);
  const int64_t num_kv_heads = k_cache.size(2);
  INFLIGHT_CHECK_CODE(head_dim > 0 && head_dim % 2 == 0, ErrorCode::kInvalidArgument,
                      "{}: head_dim must be even and positive, got {}", kOp, head_dim);
  INFLIGHT_CHECK_CODE(
      num_kv_heads > 0 && num_heads % num_kv_heads == 0, ErrorCode::kInvalidArgument,
      "{}: {} query heads are not a multiple of {} kv heads", kOp, num_heads, num_kv_heads);
  check_tensor(kOp, "q_out", q_out, dt, dev, {num_tokens, num_heads, head_dim});
  check_tensor(kOp, "qkv", qkv, dt, dev, {num_tokens, (num_heads + 2 * num_kv_heads) * head_dim});
  check_tensor(kOp, "k_cache", k_cache, dt, dev, {num_blocks, block_size, num_kv_heads, head_dim});
  check_tensor(kOp, "v_cache", v_cache, dt, dev, k_cache.shape());
  check_tensor(kOp, "positions", positions, DType::kI32, dev, {num_tokens});
  check_tensor(kOp, "slot_mapping", slot_mapping, DType::kI64, dev, {num_tokens});
  check_tensor(kOp, "inv_freq", inv_freq, DType::kF32, dev, {head_dim / 2});
  RopeKvWriteParams p;
  p.qkv = qkv.raw();
  p.q_out = q_out.raw();
  p.kv.k = k_cache.raw();
  p.kv.v = v_cache.raw();
  p.kv.num_blocks = num_blocks;
  p.kv.block_size = static_cast<int32_t>(block_size);
  p.kv.num_kv_heads = static_cast<int32_t>(num_kv_heads);
  p.kv.head_dim = static_cast<int32_t>(head_dim);
  p.positions = positions.data<int32_t>();
  p.slot_mapping = slot_mapping.data<int64_t>();
  p.inv_freq = inv_freq.data<float>();
  p.num_tokens = num_tokens;
  p.num_heads = static_cast<int32_t>(num_heads);
  p.dtype = dt;
  return p;
}

}  // namespace inflight
