// The options every subcommand that loads a model into an engine shares (serve, generate, bench
// offline and latency): what to load (a model, or dummy weights of an architecture), where, at
// what precision and parallelism, and the engine's sizes. One flag, one meaning and one help
// text in every subcommand; each command adds its own (serve: the repository, the API; bench:
// the workload) beside them.
#pragma once

#include <cstdint>
#include <string>

#include "inflight/config.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace inflight::tools {

// The flags' values; defaults are ModelSource's and EngineConfig's (include/inflight/config.h).
struct EngineOptions {
  // ---- what to load (ModelSource) ----
  std::string model;           // --model: .gguf file or Hugging Face directory; "" = the default
  bool dummy_weights = false;  // --dummy-weights: random weights of --arch or --config
  std::string arch;            // --arch: an arch preset (model/arch_presets.h)
  std::string config;          // --config: a Hugging Face config.json
  std::string tokenizer;       // --tokenizer: instead of the model's; "" = the model's
  std::string device = "auto";
  std::string quantization;             // tools/precision_options.h
  std::string kv_cache_dtype = "auto";  // tools/precision_options.h
  int32_t tensor_parallel_size = 1;     // tools/parallel_launch.h
  int32_t pipeline_parallel_size = 1;
  // ---- the engine (EngineConfig) ----
  int32_t max_model_len = 0;
  int32_t max_num_seqs = EngineConfig{}.max_num_seqs;
  int32_t max_num_batched_tokens = EngineConfig{}.max_num_batched_tokens;
  int32_t max_num_micro_batches = EngineConfig{}.max_num_micro_batches;
  int32_t block_size = EngineConfig{}.block_size;
  std::string kv_cache_memory = "auto";  // parse_kv_cache_memory's text
  double schedule_conservativeness = EngineConfig{}.schedule_conservativeness;
};

// Adds --model, --device, the precision and parallel options, --dummy-weights (--arch and
// --config need it), --tokenizer, --max-model-len, --max-num-seqs, --max-num-batched-tokens,
// --block-size, --kv-cache-memory and --schedule-conservativeness, bound to `o`. Returns --model,
// for the caller's own rules about it (serve: not with --model-repository).
CLI::Option* add_engine_options(CLI::App& app, EngineOptions& o);

// What the flags name: dummy weights of --arch / --config (kInvalidArgument without either), or
// --model (default: find_default_model()); with the tokenizer, device, precision and parallel
// sizes.
ModelSource model_source(const EngineOptions& o);

// The engine's settings from the flags, --kv-cache-memory parsed (kInvalidArgument naming the
// flag); the rest of EngineConfig at its defaults.
EngineConfig engine_config(const EngineOptions& o);

}  // namespace inflight::tools
