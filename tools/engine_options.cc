#include "tools/engine_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "core/check.h"
#include "formats/default_model.h"
#include "model/arch_presets.h"
#include "tools/parallel_launch.h"
#include "tools/precision_options.h"

namespace inflight::tools {

CLI::Option* add_engine_options(CLI::App& app, EngineOptions& o) {
  CLI::Option* model =
      app.add_option("--model", o.model,
                     "Model (.gguf file or Hugging Face directory); default: models/" +
                         std::string(kDefaultModelFile));
  auto* dummy = app.add_flag("--dummy-weights", o.dummy_weights,
                             "Random weights made on the device (needs --arch or --config, and "
                             "--tokenizer for text)");
  app.add_option(
         "--arch", o.arch,
         fmt::format("Dummy-weights architecture: {}", fmt::join(arch_preset_names(), ", ")))
      ->needs(dummy);
  app.add_option("--config", o.config, "Dummy-weights shapes from a Hugging Face config.json")
      ->needs(dummy);
  app.add_option("--tokenizer", o.tokenizer,
                 "Tokenizer file (.gguf or tokenizer.json) instead of the model's (with "
                 "--dummy-weights: one of the same vocabulary size)");
  app.add_option("--device", o.device, "auto | cpu | cuda | cuda:N")->capture_default_str();
  add_precision_options(app, o.quantization, o.kv_cache_dtype);
  add_parallel_options(app, o.tensor_parallel_size, o.pipeline_parallel_size,
                       o.max_num_micro_batches);
  app.add_option("--max-model-len", o.max_model_len,
                 "Longest prompt + output in tokens (default: the model's context length)");
  app.add_option("--max-num-seqs", o.max_num_seqs,
                 "Most sequences per engine step (0: from the memory plan, up to 1024 on a GPU)")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", o.max_num_batched_tokens,
                 "Most tokens per engine step (0: 8192 on a GPU, 2048 on the CPU)")
      ->capture_default_str();
  app.add_option("--block-size", o.block_size, "Tokens per KV block")->capture_default_str();
  app.add_option("--kv-cache-memory", o.kv_cache_memory,
                 "KV cache size: auto (0.9 on CUDA, 512MiB on the CPU), bytes (512MiB, 2G) or a "
                 "fraction (0.9) of the memory free after weights and workspace")
      ->capture_default_str();
  app.add_option("--schedule-conservativeness", o.schedule_conservativeness,
                 "KV room admission keeps for running requests' growth: 1 = the adaptive "
                 "estimate, larger = more, 0 = admit while blocks are free")
      ->capture_default_str();
  return model;
}

ModelSource model_source(const EngineOptions& o) {
  ModelSource source;
  if (o.dummy_weights) {
    INFLIGHT_CHECK_CODE(!o.arch.empty() || !o.config.empty(), ErrorCode::kInvalidArgument,
                        "--dummy-weights needs --arch NAME or --config config.json");
    source.dummy_arch = o.arch;
    source.dummy_config = o.config;
  } else {
    source.path = o.model.empty() ? find_default_model() : o.model;
  }
  source.tokenizer = o.tokenizer;
  source.device = o.device;
  source.quantization = o.quantization;
  source.kv_cache_dtype = o.kv_cache_dtype;
  source.tensor_parallel_size = o.tensor_parallel_size;
  source.pipeline_parallel_size = o.pipeline_parallel_size;
  return source;
}

EngineConfig engine_config(const EngineOptions& o) {
  EngineConfig config;
  config.max_model_len = o.max_model_len;
  config.max_num_seqs = o.max_num_seqs;
  config.max_num_batched_tokens = o.max_num_batched_tokens;
  config.max_num_micro_batches = o.max_num_micro_batches;
  config.block_size = o.block_size;
  config.schedule_conservativeness = o.schedule_conservativeness;
  if (const Status s = parse_kv_cache_memory(o.kv_cache_memory, config); !s.ok()) {
    INFLIGHT_THROW(ErrorCode::kInvalidArgument, "--kv-cache-memory: {}", s.message());
  }
  return config;
}

}  // namespace inflight::tools
