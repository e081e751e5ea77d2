#include "eval/eval_model.h"

#include <chrono>
#include <numeric>

#include <fmt/format.h>

#include "core/check.h"
#include "model/registry.h"
#include "model/weight_source.h"

namespace inflight::eval {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void check_kv_cache_dtype(const Backend& backend, std::string_view kv_cache_dtype) {
  INFLIGHT_CHECK_CODE(kv_cache_dtype == "auto" || kv_cache_dtype == "bf16" ||
                          kv_cache_dtype == "fp8",
                      ErrorCode::kInvalidArgument,
                      "KV cache dtype '{}' is not one of auto, bf16, fp8 (the {} backend)",
                      kv_cache_dtype, backend.name());
}

void apply_kv_cache_dtype(std::string_view kv_cache_dtype, ModelConfig& config) {
  if (kv_cache_dtype == "fp8") config.quantization.fp8_kv_cache = true;
  if (kv_cache_dtype == "bf16") config.quantization.fp8_kv_cache = false;
}

std::unique_ptr<KvCache> make_kv_cache(const Model& model, int64_t num_blocks,
                                       int32_t block_size) {
  // The model's config says the cache's dtype (KvCache::dtype_for).
  return std::make_unique<KvCache>(model.backend(), model.config(), num_blocks, block_size);
}

ForwardBatch window_batch(const std::vector<int32_t>& window, int32_t block_size) {
  const auto n = static_cast<int32_t>(window.size());
  const int32_t blocks = (n + block_size - 1) / block_size;
  ForwardBatch b;
  b.token_ids = window;
  b.positions.resize(static_cast<size_t>(n));
  std::iota(b.positions.begin(), b.positions.end(), 0);
  b.slot_mapping.resize(static_cast<size_t>(n));
  std::iota(b.slot_mapping.begin(), b.slot_mapping.end(), int64_t{0});  // block i holds i*bs..
  b.query_start = {0, n};
  b.context_lens = {n};
  b.block_tables.resize(static_cast<size_t>(blocks));
  std::iota(b.block_tables.begin(), b.block_tables.end(), 0);
  b.max_blocks_per_seq = blocks;
  b.logits_indices = b.positions;
  return b;
}

Tensor EvalModel::forward(const std::vector<int32_t>& window) {
  return model->forward(window_batch(window, cache->block_size()), *cache);
}

EvalModel load_eval_model(const ModelFiles& files, Backend& backend, const EvalMode& mode,
                          const EvalModel* reference, int32_t context) {
  const auto begin = std::chrono::steady_clock::now();
  EvalModel out;
  out.mode = mode;
  ModelConfig config = files.config();
  if (!mode.quantization.empty()) {
    INFLIGHT_CHECK_CODE(!config.quantization.enabled(), ErrorCode::kInvalidArgument,
                        "eval mode '{}' quantizes the model online, but the checkpoint is "
                        "already quantized ({}): compare online modes on an unquantized "
                        "(bf16/f16/f32/GGUF) checkpoint",
                        mode.name, config.quantization.describe());
    config.quantization = Quantization::online(mode.quantization);
  }
  check_kv_cache_dtype(backend, mode.kv_cache_dtype);
  apply_kv_cache_dtype(mode.kv_cache_dtype, config);
  if (mode.quantization.empty() && reference != nullptr &&
      config.quantization.fp8_kv_cache == reference->model->config().quantization.fp8_kv_cache) {
    out.model = reference->model;  // the same weights and cache dtype
  } else {
    out.model = make_model(config, weights_of(files), backend);
    backend.synchronize();  // the last copies of the weights
  }
  const int32_t block_size = kEvalBlockSize;
  const int64_t num_blocks = (context + block_size - 1) / block_size;
  out.cache = make_kv_cache(*out.model, num_blocks, block_size);
  Quantization weights = config.quantization;
  weights.fp8_kv_cache = false;  // described apart
  out.description =
      fmt::format("weights: {}, kv cache: {}",
                  weights.enabled()
                      ? weights.describe()
                      : fmt::format("as stored, in {}", dtype_name(backend.compute_dtype())),
                  mode.kv_cache_dtype == "auto" ? std::string(dtype_name(out.cache->dtype()))
                                                : mode.kv_cache_dtype);
  out.load_seconds = seconds_since(begin);
  return out;
}

}  // namespace inflight::eval
