#include "tools/precision_options.h"

#include <CLI/CLI.hpp>

namespace inflight::tools {

void add_precision_options(CLI::App& app, std::string& quantization, std::string& kv_cache_dtype) {
  app.add_option("--quantization", quantization,
                 "fp8: quantize an unquantized checkpoint (or dummy weights) to FP8 while "
                 "loading: e4m3 linear layers, a scale per output channel, activations scaled "
                 "per token (FP8 checkpoints are detected without it)")
      ->check(CLI::IsMember({"fp8"}));
  app.add_option("--kv-cache-dtype", kv_cache_dtype,
                 "KV cache storage: auto (fp8 when the checkpoint declares an FP8 KV cache, else "
                 "the compute dtype), bf16 (the compute dtype: bf16 on CUDA, f32 on the CPU) or "
                 "fp8 (e4m3 with a scale per token and kv head: half the memory of bf16)")
      ->check(CLI::IsMember({"auto", "bf16", "bfloat16", "fp8", "fp8_e4m3"}))
      ->capture_default_str();
}

}  // namespace inflight::tools
