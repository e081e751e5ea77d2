// Built-in model shapes for dummy-weight performance runs (`--dummy-weights --arch NAME`): the
// hyper-parameters of released checkpoints, no weights. Random weights of these shapes run at
// the real models' speed (model/llama.h, the dummy-weights constructor).
//
//   llama-3.1-8b   32 layers, 4096 wide, GQA 32/8, 128k vocab, llama3 RoPE scaling
//   llama-3.1-70b  80 layers, 8192 wide, GQA 64/8, 128k vocab
//   qwen2.5-7b     28 layers, 3584 wide, GQA 28/4, q/k/v biases, 152k vocab
//   mistral-7b     v0.1: 32 layers, 4096 wide, GQA 32/8, sliding window 4096, 32k vocab
//   qwen3-8b       36 layers, 4096 wide, GQA 32/8, q/k norms, 152k vocab
//   qwen3-30b-a3b  48 layers, 2048 wide, GQA 32/4, q/k norms, 128 experts of 768, top-8
//   mixtral-8x7b   32 layers, 4096 wide, GQA 32/8, 8 experts of 14336, top-2, 32k vocab
//   mpt-7b         32 layers, 4096 wide, 32 heads, LayerNorm, ALiBi, GELU MLP 16384, tied, 50k
//   mpt-30b        48 layers, 7168 wide, 64 heads, as mpt-7b, 8k context
//   smollm2-135m   30 layers, 576 wide, GQA 9/3, tied embeddings, 49k vocab
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/model_config.h"

namespace inflight {

// The seed of the tools' dummy weights: every run of a preset gets the same model.
constexpr uint64_t kDummyWeightsSeed = 20261121;

// The preset `name`, or nullopt.
std::optional<ModelConfig> arch_preset(std::string_view name);

std::vector<std::string> arch_preset_names();

// The config of a dummy-weight model: `arch` (a preset name) or `config_path` (a Hugging Face
// config.json), exactly one of them non-empty. Throws Error(kInvalidArgument) otherwise or for
// an unknown preset (listing the names), the config loader's errors for a bad file.
ModelConfig dummy_model_config(const std::string& arch, const std::string& config_path);

}  // namespace inflight
