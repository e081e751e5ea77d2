#include "model/weight_source.h"

#include <charconv>

#include "core/check.h"

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

namespace {

// Splits "<prefix>.experts.<e>.<rest>" into the stacked name "<prefix>.experts.<rest>" and e.
bool split_expert_name(const std::string& name, std::string& stacked, int64_t& expert) {
  constexpr std::string_view kExperts = ".experts.";
  const size_t at = name.rfind(kExperts);
  if (at == std::string::npos) return false;
  const size_t begin = at + kExperts.size(), dot = name.find('.', begin);
  if (dot == std::string::npos || dot == begin) return false;
  const auto [ptr, ec] = std::from_chars(name.data() + begin, name.data() + dot, expert);
  if (ec != std::errc() || ptr != name.data() + dot) return false;
  stacked = name.substr(0, begin) + name.substr(dot + 1);
  return true;
}

}  // namespace

WeightSource with_stacked_experts(WeightSource inner) {
  return [inner = std::move(inner)](const std::string& name) -> std::optional<StoredTensor> {
    std::optional<StoredTensor> t = inner(name);
    std::string stacked_name;
    int64_t e = 0;
    if (t || !split_expert_name(name, stacked_name, e)) return t;
    std::optional<StoredTensor> stacked = inner(stacked_name);
    if (!stacked) return std::nullopt;
    INFLIGHT_CHECK_CODE(stacked->shape.size() == 3 && e < stacked->shape[0],
                        ErrorCode::kInvalidFile,
                        "weight '{}' has shape {}: expected [experts, rows, cols] with expert {}",
                        stacked_name, shape_str(stacked->shape), e);
    INFLIGHT_CHECK_CODE(
        stacked->scale == nullptr && stacked->interleaved_heads == 0, ErrorCode::kUnsupported,
        "weight '{}': quantization scales of stacked experts are not supported", stacked_name);
    // Expert e is one outer row of the stacked tensor: its bytes are contiguous.
    StoredTensor slice = std::move(*stacked);
    slice.data += e * slice.row_bytes();
    slice.shape = {slice.shape[1], slice.shape[2]};
    slice.name = stacked_name + "[" + std::to_string(e) + "]";
    return slice;
  };
}

}  // namespace inflight
