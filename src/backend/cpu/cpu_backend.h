// CpuBackend: the fp32 reference implementation of Backend. Ops run synchronously on the
// calling thread and the process-wide ThreadPool, so "asynchronous" ops have completed when
// they return and synchronize() has nothing to wait for.
#pragma once

#include "runtime/backend.h"

namespace inflight {

class CpuBackend final : public Backend {
 public:
  CpuBackend() = default;

  std::string_view name() const override { return "cpu"; }
  Device device() const override { return Device::kCpu; }
  DType compute_dtype() const override { return DType::kF32; }
  bool supports_fp8() const override { return true; }  // emulated exactly (ops/scaled_gemm.h)
  bool asynchronous() const override { return false; }

  Tensor alloc(const Shape& shape, DType dtype) override;
  Tensor upload(const Tensor& host_f32, DType dtype) override;
  void load_weight(const StoredTensor& w, const Tensor& dst) override;
  void download_f32(const Tensor& src, const Tensor& dst) override;
  void download(const Tensor& src, const Tensor& dst) override;
  void copy(const Tensor& src, const Tensor& dst) override;
  void synchronize() override {}
  // total: physical RAM; free: MemAvailable; allocated: not tracked (0).
  MemoryInfo memory_info() const override;

  StepInputs upload_batch(const ForwardBatch& batch) override;

  void gather_rows(const Tensor& src, const Tensor& indices, const Tensor& dst,
                   int64_t first_index) override;
  void rms_norm(const Tensor* add, const Tensor& residual, const Tensor& weight, float eps,
                const Tensor& out) override;
  void gemm(const Tensor& x, const Linear& w, const Tensor& y) override;
  void rope_kv_write(const Tensor& qkv, const StepInputs& in, const Tensor& inv_freq,
                     const Tensor& q_out, const KvCacheLayer& kv) override;
  void paged_attention(const Tensor& q, const KvCacheLayer& kv, const StepInputs& in, float scale,
                       int32_t sliding_window, const Tensor* alibi_slopes,
                       const Tensor& out) override;
  void swiglu(const Tensor& gate_up, const Tensor& out) override;
  void layer_norm(const Tensor* add, const Tensor& residual, const Tensor& weight,
                  const Tensor* bias, float eps, const Tensor& out) override;
  void gelu(const Tensor& x, const Tensor& out) override;
  void clamp(const Tensor& x, float limit) override;
  void qk_norm(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads, const Tensor& q_weight,
               const Tensor& k_weight, float eps) override;
  void moe_route(const Tensor& logits, int32_t k, bool renormalize, const Tensor& ids,
                 const Tensor& weights) override;
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Linear& gate_up,
                   const Linear& down, const MoeWorkspace& ws, const Tensor& out) override;
  void quantize_fp8(const Tensor& x, const Tensor* static_scale, int64_t group,
                    const Tensor& values, const Tensor& scales) override;
  void gemm(const QuantizedActivations& x, const Linear& w, const Tensor& y) override;
  void fill_random(const Tensor& t, uint64_t seed, float scale, float offset,
                   const RandomWindow& window) override;
  void top_k_logits(const Tensor& logits, int32_t k, const Tensor& log_sum_exp,
                    const Tensor& top_ids, const Tensor& top_logits) override;
  void apply_token_bitmask(const Tensor& logits, const Tensor& rows,
                           const Tensor& bitmask) override;
  void mask_vocab_padding(const Tensor& logits, int64_t begin) override;

 private:
  Tensor step_buffer_;  // [capacity] u8: the packed step inputs, grown on demand
};

}  // namespace inflight
