#include "formats/weight_scales.h"

#include <memory>

#include <fmt/format.h>

#include "core/check.h"

namespace inflight {
namespace {

bool is_float_scale(StoredType t) {
  return t == StoredType::kF32 || t == StoredType::kBF16 || t == StoredType::kF16;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The scale tensor `name`, which must exist and be f32/bf16/f16.
StoredTensor find_scale(const FindStoredTensor& find, const std::string& name,
                        const StoredTensor& weight, std::string_view where) {
  std::optional<StoredTensor> s = find(name);
  INFLIGHT_CHECK_CODE(s.has_value(), ErrorCode::kInvalidFile,
                      "{}: FP8 weight '{}' has no scale tensor '{}'", where, weight.name, name);
  INFLIGHT_CHECK_CODE(is_float_scale(s->type), ErrorCode::kInvalidFile,
                      "{}: scale '{}' of '{}' is {}; scales must be f32, bf16 or f16", where, name,
                      weight.name, stored_type_name(s->type));
  return std::move(*s);
}

}  // namespace

void attach_weight_scales(StoredTensor& weight, const Quantization& q, const FindStoredTensor& find,
                          std::string_view where) {
  if (weight.type != StoredType::kF8E4M3) return;
  constexpr std::string_view kSuffix = ".weight";
  const std::string& name = weight.name;
  INFLIGHT_CHECK_CODE(
      name.size() > kSuffix.size() && name.ends_with(kSuffix), ErrorCode::kInvalidFile,
      "{}: tensor '{}' is F8_E4M3 but is not a linear weight ('<module>.weight')", where, name);
  const std::string module = name.substr(0, name.size() - kSuffix.size());
  INFLIGHT_CHECK_CODE(q.enabled(), ErrorCode::kInvalidFile,
                      "{}: tensor '{}' is F8_E4M3 but the config declares no quantization "
                      "(config.json quantization_config or hf_quant_config.json)",
                      where, name);
  INFLIGHT_CHECK_CODE(q.quantizes(module), ErrorCode::kInvalidFile,
                      "{}: tensor '{}' is F8_E4M3 but the quantization config leaves '{}' "
                      "unquantized",
                      where, name, module);
  INFLIGHT_CHECK_CODE(weight.shape.size() == 2, ErrorCode::kInvalidFile,
                      "{}: FP8 weight '{}' has shape {}; FP8 linear weights are [out, in]", where,
                      name, shape_str(weight.shape));
  const int64_t n = weight.shape[0], k = weight.shape[1];

  const bool native_block = q.weights == Quantization::WeightScales::kBlock && q.source == "fp8";
  const std::string scale_name = module + (native_block ? ".weight_scale_inv" : ".weight_scale");
  StoredTensor scale = find_scale(find, scale_name, weight, where);
  const Shape& s = scale.shape;
  bool ok = false;
  std::string expected;
  switch (q.weights) {
    case Quantization::WeightScales::kTensor:
      ok = s.empty() || s == Shape{1};
      expected = "[] or [1] (one scale per tensor)";
      break;
    case Quantization::WeightScales::kChannel:
      ok = s == Shape{n} || s == Shape{n, 1};
      expected = fmt::format("[{0}] or [{0}, 1] (one scale per output channel)", n);
      break;
    case Quantization::WeightScales::kBlock: {
      INFLIGHT_CHECK_CODE(q.block_rows > 0 && q.block_cols > 0, ErrorCode::kInvalidArgument,
                          "block scales need block sizes, have {}x{}", q.block_rows, q.block_cols);
      const Shape want = {ceil_div(n, q.block_rows), ceil_div(k, q.block_cols)};
      ok = s == want;
      expected = fmt::format("{} (one scale per {}x{} block)", shape_str(want), q.block_rows,
                             q.block_cols);
      weight.block_rows = q.block_rows;
      weight.block_cols = q.block_cols;
      break;
    }
  }
  INFLIGHT_CHECK_CODE(ok, ErrorCode::kInvalidFile,
                      "{}: scale '{}' of FP8 weight '{}' {} has shape {}; expected {}", where,
                      scale_name, name, shape_str(weight.shape), shape_str(s), expected);
  weight.scale = std::make_shared<const StoredTensor>(std::move(scale));

  if (q.activations == Quantization::ActivationScales::kStaticTensor) {
    const std::string input_name = module + ".input_scale";
    StoredTensor input = find_scale(find, input_name, weight, where);
    INFLIGHT_CHECK_CODE(input.numel() == 1, ErrorCode::kInvalidFile,
                        "{}: input scale '{}' of FP8 weight '{}' has shape {}; expected one "
                        "element ([] or [1])",
                        where, input_name, name, shape_str(input.shape));
    weight.input_scale = std::make_shared<const StoredTensor>(std::move(input));
  }
}

}  // namespace inflight
