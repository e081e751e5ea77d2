#include "model/linear_loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "model/online_fp8.h"

namespace inflight {

namespace {

using ActivationScales = Quantization::ActivationScales;

std::string module_of(const std::string& weight_name) {
  constexpr std::string_view kSuffix = ".weight";
  if (weight_name.size() > kSuffix.size() && weight_name.ends_with(kSuffix)) {
    return weight_name.substr(0, weight_name.size() - kSuffix.size());
  }
  return weight_name;
}

// The values of a scale tensor as f32, each checked finite and positive.
std::vector<float> checked_scales(const StoredTensor& scale, std::string_view weight) {
  const Tensor host = to_host_f32(scale);
  const float* v = host.data<float>();
  std::vector<float> out(v, v + host.numel());
  for (size_t i = 0; i < out.size(); ++i) {
    INFLIGHT_CHECK_CODE(std::isfinite(out[i]) && out[i] > 0.0f, ErrorCode::kInvalidFile,
                        "scale tensor '{}' of '{}' holds {} at index {}: scales must be finite "
                        "and positive (the checkpoint is damaged)",
                        scale.name, weight, out[i], i);
  }
  return out;
}

Tensor upload_scales(Backend& backend, const std::vector<float>& values, const Shape& shape) {
  Tensor host = Tensor::empty(shape, DType::kF32);
  INFLIGHT_CHECK(static_cast<size_t>(host.numel()) == values.size(), "scale shape {} for {} values",
                 shape_str(shape), values.size());
  std::memcpy(host.raw(), values.data(), values.size() * sizeof(float));
  return backend.upload(host, DType::kF32);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Weight scales of a fused e4m3 weight whose parts each carry their own (linear_loader.h).
void load_scales(Backend& backend, const PlannedLinear& plan, Linear& out) {
  const std::vector<StoredTensor>& parts = plan.weight.parts;
  const int64_t n = plan.weight.shape[0], k = plan.weight.shape[1];
  const StoredTensor& first = parts.front();
  for (const StoredTensor& p : parts) {
    INFLIGHT_CHECK_CODE(p.scale != nullptr, ErrorCode::kInvalidFile,
                        "e4m3 weight '{}' has no scale tensor", p.name);
    INFLIGHT_CHECK_CODE(p.block_rows == first.block_rows && p.block_cols == first.block_cols &&
                            (p.scale->numel() == 1) == (first.scale->numel() == 1),
                        ErrorCode::kInvalidFile,
                        "'{}' and '{}' are fused into one layer but are scaled differently",
                        first.name, p.name);
  }
  out.activations = plan.activations;
  std::vector<float> scales;
  if (first.block_cols > 0) {  // blocks of br x bc
    const int64_t br = first.block_rows, bc = first.block_cols, groups = ceil_div(k, bc);
    const int64_t stride = ceil_div(groups, 4) * 4;  // rows padded with zeros (linear.h)
    bool aligned = true;
    for (size_t i = 0; i + 1 < parts.size(); ++i) aligned &= parts[i].rows() % br == 0;
    auto add_row = [&](std::vector<float>::const_iterator row) {
      scales.insert(scales.end(), row, row + groups);
      scales.insert(scales.end(), static_cast<size_t>(stride - groups), 0.0f);
    };
    for (const StoredTensor& p : parts) {
      const std::vector<float> s = checked_scales(*p.scale, p.name);
      if (aligned) {
        for (int64_t r = 0; r < ceil_div(p.rows(), br); ++r) add_row(s.begin() + r * groups);
      } else {
        // Each row takes its block row's scales: 1 x bc groups.
        for (int64_t r = 0; r < p.rows(); ++r) add_row(s.begin() + (r / br) * groups);
      }
    }
    out.block_rows = aligned ? br : 1;
    out.block_cols = bc;
    out.activations = ActivationScales::kDynamicGroup;  // what block scaling reads
    out.scale = upload_scales(backend, scales, {ceil_div(n, out.block_rows), stride});
  } else if (first.scale->numel() == 1 && parts.size() == 1 &&
             plan.activations == ActivationScales::kStaticTensor) {
    out.scale = upload_scales(backend, checked_scales(*first.scale, first.name), {1});
  } else {  // per channel, or per-tensor scales spread over their part's rows
    for (const StoredTensor& p : parts) {
      const std::vector<float> s = checked_scales(*p.scale, p.name);
      if (s.size() == 1) {
        scales.insert(scales.end(), static_cast<size_t>(p.rows()), s[0]);
      } else {
        INFLIGHT_CHECK_CODE(static_cast<int64_t>(s.size()) == p.rows(), ErrorCode::kInvalidFile,
                            "scale tensor '{}' has {} values for the {} rows of '{}'",
                            p.scale->name, s.size(), p.rows(), p.name);
        scales.insert(scales.end(), s.begin(), s.end());
      }
    }
    out.scale = upload_scales(backend, scales, {n});
  }
  if (out.activations == ActivationScales::kStaticTensor) {
    float input_scale = 0.0f;  // x is quantized once for all parts: the largest scale
    for (const StoredTensor& p : parts) {
      INFLIGHT_CHECK_CODE(p.input_scale != nullptr, ErrorCode::kInvalidFile,
                          "'{}' has static activation scaling but no input_scale tensor", p.name);
      input_scale = std::max(input_scale, checked_scales(*p.input_scale, p.name).front());
    }
    out.input_scale = upload_scales(backend, {input_scale}, {1});
  }
}

// The online per-tensor / block scheme: `w` (the compute dtype, on the device: the weights the
// unquantized model runs) brought to the host, each of plan's stored parts (rows of w in order)
// quantized as a checkpoint stores it (online_fp8.h), then loaded as that checkpoint.
Linear quantize_parts_on_host(Backend& backend, const Tensor& w, const PlannedLinear& plan) {
  Tensor host = Tensor::empty(w.shape(), DType::kF32);
  backend.download_f32(w, host);
  backend.synchronize();
  PlannedLinear stored = plan;
  stored.quantize_online = false;
  stored.weight.dtype = DType::kF8E4M3;
  int64_t row = 0;
  for (StoredTensor& part : stored.weight.parts) {
    const int64_t rows = part.rows();
    part = quantize_weight_e4m3(part.name, host.rows(row, row + rows), plan.online);
    row += rows;
  }
  INFLIGHT_CHECK(row == w.size(0), "online fp8 of '{}': parts cover {} of {} rows", plan.module,
                 row, w.size(0));
  Linear out;
  out.weight = load_planned(backend, stored.weight);
  load_scales(backend, stored, out);
  backend.synchronize();  // the host bytes go away with `stored`
  return out;
}

}  // namespace

int64_t PlannedLinear::bytes() const {
  int64_t b = weight.bytes();
  if (fp8()) {  // at most one f32 scale per row and 128-column group, plus one
    b += (weight.shape[0] * (1 + ceil_div(weight.shape[1], 128)) + 1) * 4;
  }
  return b;
}

PlannedLinear plan_linear(const Backend& backend, const Quantization& quantization,
                          std::string module, PlannedWeight weight) {
  PlannedLinear p;
  p.module = std::move(module);
  const std::vector<StoredTensor>& parts = weight.parts;
  const bool stored_fp8 = parts.front().type == StoredType::kF8E4M3;
  bool covered = true;  // every part is a module the quantization covers
  for (const StoredTensor& part : parts) {
    INFLIGHT_CHECK_CODE((part.type == StoredType::kF8E4M3) == stored_fp8, ErrorCode::kUnsupported,
                        "'{}' ({}) and '{}' ({}) are fused into one layer but stored in different "
                        "formats",
                        parts.front().name, stored_type_name(parts.front().type), part.name,
                        stored_type_name(part.type));
    covered &= quantization.quantizes(module_of(part.name));
  }
  p.weight = std::move(weight);
  if (stored_fp8) {
    p.weight.dtype = backend.weight_dtype(p.weight.parts.front());
    p.activations = quantization.activations;
  } else if (quantization.enabled() && quantization.source == "online" && covered) {
    INFLIGHT_CHECK_CODE(backend.supports_fp8(), ErrorCode::kUnsupported,
                        "--quantization fp8: the {} backend has no FP8 GEMMs (CUDA needs compute "
                        "capability 8.9 or newer)",
                        backend.name());
    p.weight.dtype = DType::kF8E4M3;
    p.quantize_online = true;
    p.online = OnlineFp8Scheme::of(quantization);
    p.activations = quantization.activations;
  } else {
    p.weight.dtype = backend.compute_dtype();
  }
  return p;
}

void load_linear(Backend& backend, const PlannedLinear& plan, Linear& out) {
  if (plan.quantize_online) {
    PlannedWeight staged = plan.weight;
    staged.dtype = backend.compute_dtype();
    const Tensor w = load_planned(backend, staged);
    Linear q = plan.online.weights == Quantization::WeightScales::kChannel
                   ? quantize_linear_online(backend, w, plan.online)
                   : quantize_parts_on_host(backend, w, plan);
    q.bias = out.bias;
    out = std::move(q);
    return;
  }
  out.weight = load_planned(backend, plan.weight);
  if (plan.fp8()) load_scales(backend, plan, out);
}

Linear quantize_linear_online(Backend& backend, const Tensor& w, const OnlineFp8Scheme& online,
                              const std::string& name) {
  if (online.weights != Quantization::WeightScales::kChannel) {
    PlannedLinear plan;
    plan.module = name;
    StoredTensor part;  // only its name and rows are read
    part.name = name;
    part.shape = w.shape();
    plan.weight.parts.push_back(std::move(part));
    plan.weight.shape = w.shape();
    plan.online = online;
    plan.activations = online.weights == Quantization::WeightScales::kBlock
                           ? ActivationScales::kDynamicGroup
                           : ActivationScales::kDynamicToken;
    return quantize_parts_on_host(backend, w, plan);
  }
  Linear q;
  q.weight = backend.alloc(w.shape(), DType::kF8E4M3);
  q.scale = backend.alloc({w.size(0)}, DType::kF32);
  backend.quantize_fp8(w, nullptr, 0, q.weight, q.scale);
  q.activations = ActivationScales::kDynamicToken;
  return q;
}

}  // namespace inflight
