#include "backend/cpu/cpu_backend.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "ops/clamp.h"
#include "ops/fill_random.h"
#include "ops/gather_rows.h"
#include "ops/gelu.h"
#include "ops/gemm.h"
#include "ops/layer_norm.h"
#include "ops/moe_experts.h"
#include "ops/moe_route.h"
#include "ops/paged_attention.h"
#include "ops/qk_norm.h"
#include "ops/quantize_fp8.h"
#include "ops/rms_norm.h"
#include "ops/rope_kv_write.h"
#include "ops/scaled_gemm.h"
#include "ops/swiglu.h"
#include "ops/token_bitmask.h"
#include "ops/top_k_logits.h"
#include "ops/vocab_padding_mask.h"

namespace inflight {

Tensor CpuBackend::alloc(const Shape& shape, DType dtype) {
  return Tensor::empty(shape, dtype);
}

Tensor CpuBackend::upload(const Tensor& host_f32, DType dtype) {
  INFLIGHT_CHECK_CODE(
      host_f32.defined() && host_f32.device() == Device::kCpu && host_f32.dtype() == DType::kF32,
      ErrorCode::kInvalidArgument, "cpu upload: expected a host f32 tensor");
  INFLIGHT_CHECK_CODE(dtype == DType::kF32, ErrorCode::kUnsupported,
                      "cpu backend computes in f32; cannot upload as {}", dtype_name(dtype));
  Tensor t = Tensor::empty(host_f32.shape(), dtype);
  if (t.nbytes()) std::memcpy(t.raw(), host_f32.raw(), t.nbytes());
  return t;
}

void CpuBackend::load_weight(const StoredTensor& w, const Tensor& dst) {
  INFLIGHT_CHECK_CODE(dst.defined() && dst.device() == Device::kCpu && dst.numel() == w.numel(),
                      ErrorCode::kInvalidArgument,
                      "cpu load_weight: '{}' {} does not fit a destination of {} elements", w.name,
                      shape_str(w.shape), dst.defined() ? dst.numel() : 0);
  convert_rows(w, 0, w.rows(), dst.dtype(), dst.raw());
}

void CpuBackend::download_f32(const Tensor& src, const Tensor& dst) {
  INFLIGHT_CHECK_CODE(src.defined() && src.device() == Device::kCpu && src.dtype() == DType::kF32,
                      ErrorCode::kInvalidArgument, "cpu download: src must be an f32 cpu tensor");
  INFLIGHT_CHECK_CODE(dst.defined() && dst.device() == Device::kCpu && dst.dtype() == DType::kF32 &&
                          dst.shape() == src.shape(),
                      ErrorCode::kInvalidArgument,
                      "cpu download: dst must be a host f32 tensor of shape {}",
                      shape_str(src.shape()));
  if (src.nbytes() && src.raw() != dst.raw()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
}

void CpuBackend::download(const Tensor& src, const Tensor& dst) {
  INFLIGHT_CHECK_CODE(src.defined() && src.device() == Device::kCpu && dst.defined() &&
                          dst.device() == Device::kCpu && dst.dtype() == src.dtype() &&
                          dst.shape() == src.shape(),
                      ErrorCode::kInvalidArgument,
                      "cpu download: dst must be a host tensor of src's dtype and shape {}",
                      shape_str(src.shape()));
  if (src.nbytes() && src.raw() != dst.raw()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
}

void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  INFLIGHT_CHECK_CODE(
      src.defined() && dst.defined() && src.dtype() == dst.dtype() && src.shape() == dst.shape(),
      ErrorCode::kInvalidArgument, "cpu copy: dst must match src ({} {})", dtype_name(src.dtype()),
      shape_str(src.shape()));
  if (src.nbytes() && src.raw() != dst.raw()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
}

MemoryInfo CpuBackend::memory_info() const {
  MemoryInfo info;
  info.host = true;
  info.total = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  info.free = info.total;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") {
      info.free = kib * 1024;
      break;
    }
  }
  return info;
}

StepInputs CpuBackend::upload_batch(const ForwardBatch& batch) {
  const StepInputLayout layout = StepInputLayout::of(batch);
  if (!step_buffer_.defined() || static_cast<size_t>(step_buffer_.numel()) < layout.total_bytes) {
    step_buffer_ = Tensor::empty({static_cast<int64_t>(layout.total_bytes)}, DType::kU8);
  }
  layout.pack(batch, step_buffer_.raw());
  return layout.views(batch, step_buffer_.raw(), Device::kCpu, step_buffer_.owner());
}

void CpuBackend::gather_rows(const Tensor& src, const Tensor& indices, const Tensor& dst,
                             int64_t first_index) {
  gather_rows_cpu(make_gather_rows_params(src, indices, dst, first_index));
}

void CpuBackend::rms_norm(const Tensor* add, const Tensor& residual, const Tensor& weight,
                          float eps, const Tensor& out) {
  rms_norm_cpu(make_rms_norm_params(add, residual, weight, eps, out));
}

void CpuBackend::gemm(const Tensor& x, const Linear& w, const Tensor& y) {
  w.require_unscaled(name());
  gemm_cpu(make_gemm_params(x, w.weight, w.bias_or_null(), y));
}

void CpuBackend::rope_kv_write(const Tensor& qkv, const StepInputs& in, const Tensor& inv_freq,
                               const Tensor& q_out, const KvCacheLayer& kv) {
  rope_kv_write_cpu(
      make_rope_kv_write_params(qkv, in.positions, in.slot_mapping, inv_freq, q_out, kv));
}

void CpuBackend::paged_attention(const Tensor& q, const KvCacheLayer& kv, const StepInputs& in,
                                 float scale, int32_t sliding_window, const Tensor* alibi_slopes,
                                 const Tensor& out) {
  paged_attention_cpu(make_paged_attention_params(q, kv, in.block_tables, in.query_start,
                                                  in.context_lens, in.max_context_len,
                                                  sliding_window, scale, alibi_slopes, out));
}

void CpuBackend::swiglu(const Tensor& gate_up, const Tensor& out) {
  swiglu_cpu(make_swiglu_params(gate_up, out));
}

void CpuBackend::layer_norm(const Tensor* add, const Tensor& residual, const Tensor& weight,
                            const Tensor* bias, float eps, const Tensor& out) {
  layer_norm_cpu(make_layer_norm_params(add, residual, weight, bias, eps, out));
}

void CpuBackend::gelu(const Tensor& x, const Tensor& out) {
  gelu_cpu(make_gelu_params(x, out));
}

void CpuBackend::clamp(const Tensor& x, float limit) {
  clamp_cpu(make_clamp_params(x, limit));
}

void CpuBackend::qk_norm(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads,
                         const Tensor& q_weight, const Tensor& k_weight, float eps) {
  qk_norm_cpu(make_qk_norm_params(qkv, num_heads, num_kv_heads, q_weight, k_weight, eps));
}

void CpuBackend::moe_route(const Tensor& logits, int32_t k, bool renormalize, const Tensor& ids,
                           const Tensor& weights) {
  moe_route_cpu(make_moe_route_params(logits, k, renormalize, ids, weights));
}

void CpuBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                             const Linear& gate_up, const Linear& down, const MoeWorkspace& ws,
                             const Tensor& out) {
  moe_experts_cpu(make_moe_experts_params(x, ids, weights, gate_up, down, ws, out));
}

void CpuBackend::quantize_fp8(const Tensor& x, const Tensor* static_scale, int64_t group,
                              const Tensor& values, const Tensor& scales) {
  quantize_fp8_cpu(make_quantize_fp8_params(x, static_scale, group, values, scales));
}

void CpuBackend::gemm(const QuantizedActivations& x, const Linear& w, const Tensor& y) {
  scaled_gemm_cpu(make_scaled_gemm_params(x, w, y));
}

}  // namespace inflight

namespace inflight {

void CpuBackend::fill_random(const Tensor& t, uint64_t seed, float scale, float offset,
                             const RandomWindow& w) {
  INFLIGHT_CHECK_CODE(t.defined() && t.device() == Device::kCpu, ErrorCode::kInvalidArgument,
                      "cpu fill_random: expected a cpu tensor");
  fill_random_cpu(make_fill_random_params(t, seed, scale, offset, w.first, w.cols, w.whole_cols));
}

void CpuBackend::top_k_logits(const Tensor& logits, int32_t k, const Tensor& log_sum_exp,
                              const Tensor& top_ids, const Tensor& top_logits) {
  INFLIGHT_CHECK_CODE(logits.defined() && logits.device() == Device::kCpu,
                      ErrorCode::kInvalidArgument, "cpu top_k_logits: expected cpu tensors");
  top_k_logits_cpu(make_top_k_logits_params(logits, k, log_sum_exp, top_ids, top_logits));
}

void CpuBackend::apply_token_bitmask(const Tensor& logits, const Tensor& rows,
                                     const Tensor& bitmask) {
  token_bitmask_cpu(make_token_bitmask_params(logits, rows, bitmask));
}

void CpuBackend::mask_vocab_padding(const Tensor& logits, int64_t begin) {
  vocab_padding_mask_cpu(make_vocab_padding_mask_params(logits, begin));
}

}  // namespace inflight
