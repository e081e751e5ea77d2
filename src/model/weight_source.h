// WeightSource: where a model's builder finds its stored tensors by canonical name
// (formats/model_files.h): a model's files, or tensors made in memory (tests).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/tensor.h"
#include "formats/model_files.h"
#include "formats/stored_tensor.h"

namespace inflight {

// The stored tensor `name`, or nullopt when there is none.
using WeightSource = std::function<std::optional<StoredTensor>(const std::string& name)>;

// Host f32 weights by canonical name, e.g. "model.layers.0.mlp.up_proj.weight".
using WeightMap = std::unordered_map<std::string, Tensor>;

// NOTE: both views borrow their argument, which must outlive the source.
WeightSource weights_of(const ModelFiles& files);
WeightSource weights_of(const WeightMap& weights);

// `inner`, where a per-expert name "<prefix>.experts.<e>.<proj>.weight" that `inner` lacks is
// slice e of the stacked tensor "<prefix>.experts.<proj>.weight" [experts, rows, cols] (GGUF
// files stack the experts of a layer: formats/gguf_model_files.h). Throws Error(kInvalidFile)
// for a stacked tensor that is not 3-D or has no expert e, Error(kUnsupported) for one with
// quantization scales.
WeightSource with_stacked_experts(WeightSource inner);

}  // namespace inflight
