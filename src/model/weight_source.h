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

}  // namespace inflight
