#include "bench/roofline.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend_factory.h"
#include "core/check.h"
#include "core/dtype.h"
#include "runtime/backend.h"

namespace inflight::bench {

namespace {

// Median wall time of `repeats` runs of `op` (each ended by a synchronize), after one warm-up.
template <typename Op>
double median_seconds(Backend& backend, int32_t repeats, Op op) {
  op();
  backend.synchronize();
  std::vector<double> times;
  for (int32_t i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    op();
    backend.synchronize();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

}  // namespace

ModelCost model_cost(const ModelConfig& c, int64_t elem_bytes, int64_t tokens) {
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t attention = c.hidden_size * (q + 2 * kv) + q * c.hidden_size;
  // A dense MLP (gate, up, down; MPT's GELU MLP: up, down); or the router and the experts, of
  // which a token uses (and a batch-1 decode step reads) num_experts_per_token.
  const int64_t expert = 3 * c.hidden_size * c.expert_intermediate_size();
  const int64_t router = c.num_experts * c.hidden_size;
  const bool moe = c.num_experts > 0;
  const int64_t mlp_mats = c.mlp == ModelConfig::Mlp::kGelu ? 2 : 3;
  const int64_t linear_per_layer =
      attention +
      (moe ? router + c.num_experts * expert : mlp_mats * c.hidden_size * c.intermediate_size);
  const int64_t active_per_layer =
      moe ? attention + router + c.num_experts_per_token * expert : linear_per_layer;
  const int64_t norms =
      (2 * c.num_layers + 1) * c.hidden_size + (c.qk_norm ? 2 * c.num_layers * c.head_dim : 0);
  const int64_t embed = c.vocab_size * c.hidden_size;
  const int64_t lm_head = embed;  // tied or not, a decode step reads vocab x hidden once
  ModelCost cost;
  cost.weight_bytes =
      (c.num_layers * linear_per_layer + norms + embed + (c.tie_word_embeddings ? 0 : lm_head)) *
      elem_bytes;
  cost.decode_read_bytes = (c.num_layers * active_per_layer + norms + lm_head) * elem_bytes;
  // QK^T and PV over the causal triangle: 2 x 2 x heads x head_dim per (query, key) pair.
  const int64_t pairs = tokens * (tokens + 1) / 2;
  cost.prefill_flops = 2 * c.num_layers * active_per_layer * tokens +
                       4 * c.num_layers * q * pairs + 2 * lm_head;
  return cost;
}

Roofline measure_roofline(const RooflineOptions& o) {
  INFLIGHT_CHECK_CODE(o.repeats >= 1 && o.copy_bytes >= 0 && o.gemm_size >= 0,
                      ErrorCode::kInvalidArgument,
                      "--repeats must be >= 1, --copy-bytes and --gemm-size >= 0");
  std::unique_ptr<Backend> backend = make_backend(o.device);
  const bool gpu = backend->device().is_cuda();
  Roofline r;
  r.device = resolve_device(o.device);
  r.compute_dtype = dtype_name(backend->compute_dtype());
  r.copy_bytes = (o.copy_bytes > 0 ? o.copy_bytes : (gpu ? int64_t{2} << 30 : int64_t{256} << 20)) / 4 * 4;
  r.gemm_size = o.gemm_size > 0 ? o.gemm_size : (gpu ? 8192 : 1024);
  {
    // Both buffers written first: untouched host pages would be copied from the zero page.
    const Tensor a = backend->alloc({r.copy_bytes / 4}, DType::kF32);
    const Tensor b = backend->alloc({r.copy_bytes / 4}, DType::kF32);
    backend->fill_random(a, 1, 1.0f, 0.0f);
    backend->fill_random(b, 1, 1.0f, 0.0f);
    const double s = median_seconds(*backend, o.repeats, [&] { backend->copy(a, b); });
    r.copy_bytes_per_s = 2.0 * static_cast<double>(r.copy_bytes) / s;
  }
  {
    const int64_t n = r.gemm_size;
    const DType dt = backend->compute_dtype();
    const Tensor x = backend->alloc({n, n}, dt);
    const Linear w{.weight = backend->alloc({n, n}, dt)};
    const Tensor y = backend->alloc({n, n}, dt);
    backend->fill_random(x, 2, 1.0f, 0.0f);
    backend->fill_random(w.weight, 3, 1.0f, 0.0f);
    const double s = median_seconds(*backend, o.repeats, [&] { backend->gemm(x, w, y); });
    r.matrix_flops_per_s = 2.0 * static_cast<double>(n) * n * n / s;
  }
  return r;
}

namespace {

int64_t elem_bytes_of(const Roofline& r) {
  return r.compute_dtype == "f32" ? 4 : 2;
}

}  // namespace

void print_roofline(std::FILE* out, const Roofline& r, const std::optional<ModelConfig>& model,
                    const RooflineOptions& o) {
  auto row = [out](const std::string& label, const std::string& value) {
    std::fprintf(out, "%-44s %s\n", label.c_str(), value.c_str());
  };
  std::fprintf(out, "==================== Roofline ====================\n");
  row("Device:", r.device);
  row(fmt::format("Copy bandwidth, {} MiB (GB/s):", r.copy_bytes >> 20),
      fmt::format("{:.0f}", r.copy_bytes_per_s / 1e9));
  row(fmt::format("Matrix rate, {} GEMM {}^3 (TFLOP/s):", r.compute_dtype, r.gemm_size),
      fmt::format("{:.3g}", r.matrix_flops_per_s / 1e12));
  if (model) {
    const ModelCost cost = model_cost(*model, elem_bytes_of(r), o.prefill_tokens);
    const double decode_s = static_cast<double>(cost.decode_read_bytes) / r.copy_bytes_per_s;
    const double prefill_s = static_cast<double>(cost.prefill_flops) / r.matrix_flops_per_s;
    row("Decode step reads (GB):", fmt::format("{:.2f}", cost.decode_read_bytes / 1e9));
    row("Decode floor, batch 1 (ms / tokens/s):",
        fmt::format("{:.3f} / {:.1f}", decode_s * 1e3, 1.0 / decode_s));
    row(fmt::format("Prefill of {} tokens (TFLOP):", o.prefill_tokens),
        fmt::format("{:.2f}", cost.prefill_flops / 1e12));
    row(fmt::format("Prefill floor, {} tokens (ms):", o.prefill_tokens),
        fmt::format("{:.2f}", prefill_s * 1e3));
  }
  std::fprintf(out, "%s\n", std::string(50, '=').c_str());
}

nlohmann::json roofline_json(const Roofline& r, const std::optional<ModelConfig>& model,
                             const RooflineOptions& o, const RunInfo& info) {
  nlohmann::json j;
  j["mode"] = "roofline";
  add_run_info(j, info);
  j["backend"] = r.device;
  j["compute_dtype"] = r.compute_dtype;
  j["repeats"] = o.repeats;
  j["copy_bytes"] = r.copy_bytes;
  j["copy_gb_per_s"] = r.copy_bytes_per_s / 1e9;
  j["gemm_size"] = r.gemm_size;
  j["matrix_tflop_per_s"] = r.matrix_flops_per_s / 1e12;
  if (model) {
    const ModelCost cost = model_cost(*model, elem_bytes_of(r), o.prefill_tokens);
    j["model"] = model->name;
    j["weight_bytes"] = cost.weight_bytes;
    j["decode_read_bytes"] = cost.decode_read_bytes;
    j["decode_floor_ms"] = static_cast<double>(cost.decode_read_bytes) / r.copy_bytes_per_s * 1e3;
    j["prefill_tokens"] = o.prefill_tokens;
    j["prefill_flops"] = cost.prefill_flops;
    j["prefill_floor_ms"] = static_cast<double>(cost.prefill_flops) / r.matrix_flops_per_s * 1e3;
  }
  return j;
}

}  // namespace inflight::bench
