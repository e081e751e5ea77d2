#include "ops/paged_attention.h"

#include "ops/op_checks.h"

namespace inflight {

PagedAttentionParams make_paged_attention_params(
    const Tensor& q, const KvCacheLayer& kv, const Tensor& block_tables, const Tensor& query_start,
    const Tensor& context_lens, int32_t max_context_len, int32_t sliding_window, float scale,
    const Tensor* alibi_slopes, const Tensor& out) {
  constexpr const char* kOp = "paged_attention";
  INFLIGHT_CHECK_CODE(q.defined() && is_float_dtype(q.dtype()), ErrorCode::kInvalidArgument,
                      "{}: q must be a float tensor", kOp);
  const DType dt = q.dtype();
  const Device dev = q.device();
  check_tensor_kind(kOp, "q", q, dt, dev, 3);
  PagedAttentionParams p;
  p.kv = make_paged_kv(kOp, kv, dt, dev);
  check_tensor_kind(kOp, "block_tables", block_tables, DType::kI32, dev, 2);
  const int64_t num_tokens = q.size(0), num_heads = q.size(1), head_dim = q.size(2);
  const int64_t block_size = p.kv.block_size, num_kv_heads = p.kv.num_kv_heads;
  const int64_t num_seqs = block_tables.size(0), max_blocks = block_tables.size(1);
  INFLIGHT_CHECK_CODE(
      num_kv_heads > 0 && num_heads % num_kv_heads == 0, ErrorCode::kInvalidArgument,
      "{}: {} query heads are not a multiple of {} kv heads", kOp, num_heads, num_kv_heads);
  INFLIGHT_CHECK_CODE(block_size > 0, ErrorCode::kInvalidArgument, "{}: block_size is 0", kOp);
  INFLIGHT_CHECK_CODE(p.kv.head_dim == head_dim, ErrorCode::kInvalidArgument,
                      "{}: the cache's head_dim {} is not q's {}", kOp, p.kv.head_dim, head_dim);
  check_tensor(kOp, "query_start", query_start, DType::kI32, dev, {num_seqs + 1});
  check_tensor(kOp, "context_lens", context_lens, DType::kI32, dev, {num_seqs});
  check_tensor(kOp, "out", out, dt, dev, q.shape());
  INFLIGHT_CHECK_CODE(out.numel() == 0 || out.raw() != q.raw(), ErrorCode::kInvalidArgument,
                      "{}: out must not alias q", kOp);
  INFLIGHT_CHECK_CODE(max_context_len >= 0 && max_context_len <= max_blocks * block_size,
                      ErrorCode::kInvalidArgument,
                      "{}: max_context_len {} does not fit {} blocks of {} tokens", kOp,
                      max_context_len, max_blocks, block_size);
  INFLIGHT_CHECK_CODE(sliding_window >= 0, ErrorCode::kInvalidArgument,
                      "{}: sliding_window must be >= 0, got {}", kOp, sliding_window);
  if (alibi_slopes != nullptr) {
    check_tensor(kOp, "alibi_slopes", *alibi_slopes, DType::kF32, dev, {num_heads});
    p.alibi_slopes = alibi_slopes->data<float>();
  }
  p.q = q.raw();
  p.out = out.raw();
  p.kv.block_tables = block_tables.data<int32_t>();
  p.kv.max_blocks_per_seq = static_cast<int32_t>(max_blocks);
  p.query_start = query_start.data<int32_t>();
  p.context_lens = context_lens.data<int32_t>();
  p.num_tokens = num_tokens;
  p.num_seqs = static_cast<int32_t>(num_seqs);
  p.num_heads = static_cast<int32_t>(num_heads);
  p.max_context_len = max_context_len;
  p.sliding_window = sliding_window;
  p.scale = scale;
  p.dtype = dt;
  return p;
}

}  // namespace inflight
