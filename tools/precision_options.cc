#include "tools/precision_options.h"

#include <CLI/CLI.hpp>

#include "formats/quantization.h"

namespace inflight::tools {

void add_precision_options(CLI::App& app, std::string& quantization, std::string& kv_cache_dtype) {
  app.add_option("--quantization", quantization,
                 "fp8 (= fp8-channel) | fp8-tensor | fp8-block: quantize an unquantized checkpoint "
                 "(or dummy weights) to FP8 while loading: e4m3 linear layers with a scale per "
                 "output channel, per tensor or per 128 x 128 block, activations scaled per token "
                 "(per token and 128 columns for blocks); FP8 checkpoints are detected without it")
      ->check(CLI::IsMember(Quantization::online_names()));
  app.add_option("--kv-cache-dtype", kv_cache_dtype,
                 "KV cache storage: auto (fp8 when the checkpoint declares an FP8 KV cache, else "
                 "the compute dtype), bf16 (the compute dtype: bf16 on CUDA, f32 on the CPU) or "
                 "fp8 (e4m3 with a scale per token and kv head: half the memory of bf16)")
      ->check(CLI::IsMember({"auto", "bf16", "bfloat16", "fp8", "fp8_e4m3"}))
      ->capture_default_str();
}

}  // namespace inflight::tools
