// Engine::load: from a ModelSource to a running engine. The one place the tools, the tests and
// the bindings build an engine from a path or dummy shapes: backend by device name, model by
// architecture (model/registry.h), tokenizer and chat template from the model's files.
#include <chrono>

#include "backend/backend_factory.h"
#include "core/check.h"
#include "core/logging.h"
#include "engine/engine_impl.h"
#include "formats/model_files.h"
#include "model/arch_presets.h"
#include "model/registry.h"
#include "runtime/device_runner.h"
#include "tokenizer/tokenizer.h"

namespace inflight {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The model's quantization as `source` asks (the checkpoint's own, or online FP8) and its KV
// cache's dtype.
void apply_quantization(const ModelSource& source, ModelConfig& config) {
  if (!source.quantization.empty()) {
    const Quantization online = Quantization::online(source.quantization);  // checks the name
    if (!config.quantization.enabled()) {
      const bool fp8_kv_cache = config.quantization.fp8_kv_cache;
      config.quantization = online;
      config.quantization.fp8_kv_cache = fp8_kv_cache;
    }
  }
  const std::string& kv = source.kv_cache_dtype;
  if (kv == "fp8" || kv == "fp8_e4m3") {
    config.quantization.fp8_kv_cache = true;
  } else if (kv == "bf16" || kv == "bfloat16") {
    config.quantization.fp8_kv_cache = false;
  } else {
    INFLIGHT_CHECK_CODE(kv == "auto" || kv.empty(), ErrorCode::kInvalidArgument,
                        "kv_cache_dtype '{}' is not supported (supported: auto, bf16, fp8)", kv);
  }
  if (config.quantization.enabled() || config.quantization.fp8_kv_cache) {
    INFLIGHT_LOG_INFO("quantization: {}", config.quantization.describe());
  }
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::load(const ModelSource& source,
                                             const EngineConfig& config) {
  const bool dummy = !source.dummy_arch.empty() || !source.dummy_config.empty();
  if (dummy == !source.path.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "give either a model path or dummy weights (an architecture or a config.json)");
  }
  try {
    const auto begin = std::chrono::steady_clock::now();
    std::unique_ptr<Backend> backend = make_backend(source.device);
    std::shared_ptr<const Tokenizer> tokenizer;
    Impl::ModelInfo info;
    std::unique_ptr<Model> model;
    if (dummy) {
      info.name = source.dummy_arch.empty() ? source.dummy_config : source.dummy_arch;
      if (!source.tokenizer.empty()) tokenizer = Tokenizer::from_path(source.tokenizer);
      ModelConfig config = dummy_model_config(source.dummy_arch, source.dummy_config);
      apply_quantization(source, config);
      model = make_dummy_model(config, *backend, source.dummy_seed);
    } else {
      info.name = source.path;
      const std::unique_ptr<ModelFiles> files = ModelFiles::open(source.path);
      tokenizer = Tokenizer::from_path(source.tokenizer.empty() ? files->tokenizer_path()
                                                                : source.tokenizer);
      info.chat_template = files->chat_template();
      const double opened = seconds_since(begin);
      const auto weights_begin = std::chrono::steady_clock::now();
      ModelConfig config = files->config();
      apply_quantization(source, config);
      model = make_model(config, weights_of(*files), *backend);
      backend->synchronize();  // the last copies of the weights
      const double loaded = seconds_since(weights_begin);
      INFLIGHT_LOG_INFO(
          "loaded {}: files and tokenizer {:.2f} s, weights {:.2f} GiB in {:.2f} s "
          "({:.1f} GiB/s, converted from their stored format on {})",
          source.path, opened, static_cast<double>(model->weight_bytes()) / (1 << 30), loaded,
          static_cast<double>(model->weight_bytes()) / (1 << 30) / std::max(loaded, 1e-9),
          backend->name());
    }
    auto runner = std::make_unique<DeviceRunner>(std::move(backend), std::move(model));
    Result<std::unique_ptr<Engine>> engine = create(config, std::move(runner), tokenizer);
    if (!engine.ok()) return engine.status();
    engine.value()->impl_->set_model_info(std::move(info));
    INFLIGHT_LOG_INFO("engine ready in {:.2f} s", seconds_since(begin));
    return engine;
  } catch (const std::exception& e) {
    return status_from(e);
  }
}

}  // namespace inflight
