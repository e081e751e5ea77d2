#include "model/weight_source.h"

namespace inflight {

WeightSource weights_of(const ModelFiles& files) {
  return [&files](const std::string& name) -> std::optional<StoredTensor> {
    if (!files.has_tensor(name)) return std::nullopt;
    return files.load_raw(name);
  };
}

WeightSource weights_of(const WeightMap& weights) {
  return [&weights](const std::string& name) -> std::optional<StoredTensor> {
    const auto it = weights.find(name);
    if (it == weights.end()) return std::nullopt;
    return StoredTensor::from_host(name, it->second);
  };
}

}  // namespace inflight
