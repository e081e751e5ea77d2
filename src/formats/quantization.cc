// Quantization::from_hf: the three FP8 checkpoint dialects (quantization.h) read into one value.
//
// Every key is read through a JsonKey, which knows the file and the dotted path it came from, so
// that each refusal names them: a wrong JSON type is Error(kInvalidFile), a well-formed value we
// do not run (int4, e5m2, weight-only FP8, ...) Error(kUnsupported).
#include "formats/quantization.h"

#include <fnmatch.h>

#include <cstdio>
#include <optional>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "formats/json_key.h"

namespace inflight {
namespace {

using json = nlohmann::json;

[[noreturn]] void refuse(const JsonKey& key, std::string_view why) {
  INFLIGHT_THROW(ErrorCode::kUnsupported, "{} is {}; {}", key.where(), key.shown(), why);
}

// Checks `key` is absent or equals `want` (an int, string or bool), refusing anything else.
template <typename T>
void expect_if_present(const JsonKey& key, const T& want, std::string_view why) {
  if (key.absent()) return;
  if constexpr (std::is_same_v<T, bool>) {
    if (key.boolean() != want) refuse(key, why);
  } else if constexpr (std::is_integral_v<T>) {
    if (key.integer() != want) refuse(key, why);
  } else {
    if (key.str() != want) refuse(key, why);
  }
}

// Ignore entries: "re:" patterns must compile (the rest are names or globs).
void check_ignore_patterns(const JsonKey& key, const std::vector<std::string>& entries) {
  for (const std::string& e : entries) {
    if (e.rfind("re:", 0) != 0) continue;
    try {
      std::regex(e.substr(3), std::regex::ECMAScript);
    } catch (const std::regex_error& err) {
      INFLIGHT_THROW(ErrorCode::kInvalidFile, "{}: '{}' is not a valid regular expression: {}",
                     key.where(), e, err.what());
    }
  }
}

// [rows, cols] of positive integers (a block shape); compressed-tensors' older "128x128" string
// is read too.
std::pair<int64_t, int64_t> block_shape(const JsonKey& key) {
  key.require();
  long long r = 0, c = 0;
  if (key.value().is_string()) {
    const std::string s = key.str();
    char end = 0;
    INFLIGHT_CHECK_CODE(std::sscanf(s.c_str(), "%lldx%lld%c", &r, &c, &end) == 2,
                        ErrorCode::kInvalidFile, "{} must be [rows, cols], found {}", key.where(),
                        key.shown());
  } else {
    INFLIGHT_CHECK_CODE(key.value().is_array() && key.value().size() == 2, ErrorCode::kInvalidFile,
                        "{} must be [rows, cols], found {}", key.where(), key.shown());
    r = key.index(0).integer();
    c = key.index(1).integer();
  }
  INFLIGHT_CHECK_CODE(r > 0 && c > 0 && r <= INT32_MAX && c <= INT32_MAX, ErrorCode::kInvalidFile,
                      "{} must be two positive sizes, found {}", key.where(), key.shown());
  return {r, c};
}

constexpr std::string_view kOnlyFp8 = "only 8-bit float (FP8 e4m3) weights are supported";

// compressed-tensors "float-quantized" (or "naive-quantized" with float types): one group.
Quantization from_compressed_tensors(const JsonKey& qc) {
  Quantization q;
  q.method = Quantization::Method::kFp8;
  q.source = "compressed-tensors";
  const auto check_format = [](const JsonKey& key) {
    const std::optional<std::string> format = key.str_or_null();
    if (format && *format != "float-quantized" && *format != "naive-quantized") {
      refuse(key, "only FP8 checkpoints (float-quantized) are supported");
    }
  };
  check_format(qc.at("format"));
  // Sparse (2:4) storage and weight transforms (rotations) change what the weights mean.
  const JsonKey sparsity = qc.at("sparsity_config");
  if (!sparsity.absent() && !(sparsity.value().is_object() && sparsity.value().empty())) {
    sparsity.object();
    const std::optional<std::string> sf = sparsity.at("format").str_or_null();
    if (sf && *sf != "dense") refuse(sparsity.at("format"), "sparse checkpoints are not supported");
  }
  const JsonKey transform = qc.at("transform_config");
  if (!transform.absent() && !(transform.value().is_object() && transform.value().empty())) {
    refuse(transform, "checkpoints with weight transforms are not supported");
  }

  const JsonKey groups = qc.at("config_groups").require().object();
  INFLIGHT_CHECK_CODE(!groups.value().empty(), ErrorCode::kInvalidFile, "{} is empty",
                      groups.where());
  INFLIGHT_CHECK_CODE(groups.value().size() == 1, ErrorCode::kUnsupported,
                      "{} has {} groups; only one config group (every Linear layer) is supported",
                      groups.where(), groups.value().size());
  const JsonKey group = groups.at(groups.value().begin().key()).object();
  const std::vector<std::string> targets = group.at("targets").require().strings();
  if (targets != std::vector<std::string>{"Linear"}) {
    refuse(group.at("targets"), "only a group targeting [\"Linear\"] is supported");
  }
  check_format(group.at("format"));

  // Weights: float, 8 bits, symmetric, static scales per tensor / channel / block.
  const JsonKey w = group.at("weights");
  if (w.absent()) refuse(w, "only FP8 weights are supported (activation-only quantization is not)");
  w.object();
  if (w.at("type").require().str() != "float") refuse(w.at("type"), kOnlyFp8);
  if (w.at("num_bits").require().integer() != 8) refuse(w.at("num_bits"), kOnlyFp8);
  expect_if_present(w.at("symmetric"), true, "only symmetric FP8 weights are supported");
  expect_if_present(w.at("dynamic"), false, "weight scales must be stored in the checkpoint");
  if (!w.at("actorder").absent()) refuse(w.at("actorder"), "activation ordering is not supported");
  const std::string ws = w.at("strategy").require().str();
  if (ws == "tensor") {
    q.weights = Quantization::WeightScales::kTensor;
  } else if (ws == "channel") {
    q.weights = Quantization::WeightScales::kChannel;
  } else if (ws == "block") {
    q.weights = Quantization::WeightScales::kBlock;
    std::tie(q.block_rows, q.block_cols) = block_shape(w.at("block_structure"));
  } else {
    refuse(w.at("strategy"), "FP8 weight scales can be per tensor, channel or block");
  }

  // Activations: FP8 too. Dynamic per-tensor scaling runs per token (finer, never worse).
  const JsonKey a = group.at("input_activations");
  if (a.absent()) {
    refuse(a,
           "weight-only FP8 (unquantized activations) is not supported; FP8 activations "
           "(dynamic or static) are needed");
  }
  a.object();
  if (a.at("type").require().str() != "float") {
    refuse(a.at("type"), "only FP8 (e4m3) activations are supported");
  }
  if (a.at("num_bits").require().integer() != 8) {
    refuse(a.at("num_bits"), "only FP8 (e4m3) activations are supported");
  }
  expect_if_present(a.at("symmetric"), true, "only symmetric FP8 activations are supported");
  const JsonKey dyn = a.at("dynamic").require();
  if (dyn.value().is_string()) refuse(dyn, "activation scales must be dynamic (true) or static");
  const std::string as = a.at("strategy").require().str();
  if (dyn.boolean()) {
    if (as == "token" || as == "tensor") {
      q.activations = Quantization::ActivationScales::kDynamicToken;
    } else if (as == "group" && q.weights == Quantization::WeightScales::kBlock) {
      const JsonKey gs = a.at("group_size");
      if (gs.require().integer() != q.block_cols) {
        refuse(gs, fmt::format("activation groups must match the weight blocks' {} columns",
                               q.block_cols));
      }
      q.activations = Quantization::ActivationScales::kDynamicGroup;
    } else {
      refuse(a.at("strategy"),
             "dynamic FP8 activations can be per token or tensor (or per "
             "group with block weights)");
    }
  } else if (as == "tensor") {
    q.activations = Quantization::ActivationScales::kStaticTensor;
  } else {
    refuse(a.at("strategy"), "static FP8 activations can only be per tensor");
  }
  if (!group.at("output_activations").absent()) {
    refuse(group.at("output_activations"), "output activation quantization is not supported");
  }

  q.ignore = qc.at("ignore").strings();
  check_ignore_patterns(qc.at("ignore"), q.ignore);

  const JsonKey kv = qc.at("kv_cache_scheme");
  if (!kv.absent()) {
    kv.object();
    constexpr std::string_view kKvWhy = "only a static per-tensor FP8 KV-cache scheme is supported";
    if (kv.at("type").require().str() != "float") refuse(kv.at("type"), kKvWhy);
    if (kv.at("num_bits").require().integer() != 8) refuse(kv.at("num_bits"), kKvWhy);
    if (kv.at("strategy").require().str() != "tensor") refuse(kv.at("strategy"), kKvWhy);
    expect_if_present(kv.at("dynamic"), false, kKvWhy);
    expect_if_present(kv.at("symmetric"), true, kKvWhy);
    q.kv_cache_scales = true;
    q.fp8_kv_cache = true;
  }
  return q;
}

// transformers' FP8 config (quant_method "fp8"): DeepSeek-V3, Qwen3-FP8 block checkpoints, or
// per-tensor ones.
Quantization from_native_fp8(const JsonKey& qc) {
  Quantization q;
  q.method = Quantization::Method::kFp8;
  q.source = "fp8";
  expect_if_present(qc.at("fmt"), std::string("e4m3"), "only FP8 e4m3 weights are supported");
  const std::string scheme = qc.at("activation_scheme").str_or_null().value_or("dynamic");
  if (scheme != "dynamic" && scheme != "static") {
    refuse(qc.at("activation_scheme"), "activation_scheme can be \"dynamic\" or \"static\"");
  }
  const JsonKey block = qc.at("weight_block_size");
  if (!block.absent()) {
    q.weights = Quantization::WeightScales::kBlock;
    std::tie(q.block_rows, q.block_cols) = block_shape(block);
    if (scheme != "dynamic") {
      refuse(qc.at("activation_scheme"), "block FP8 weights need dynamic activations");
    }
    q.activations = Quantization::ActivationScales::kDynamicGroup;
  } else {
    q.weights = Quantization::WeightScales::kTensor;
    q.activations = scheme == "static" ? Quantization::ActivationScales::kStaticTensor
                                       : Quantization::ActivationScales::kDynamicToken;
  }
  for (const char* key : {"modules_to_not_convert", "ignored_layers"}) {
    const std::vector<std::string> more = qc.at(key).strings();
    check_ignore_patterns(qc.at(key), more);
    q.ignore.insert(q.ignore.end(), more.begin(), more.end());
  }
  return q;
}

// ModelOpt: hf_quant_config.json's "quantization" object, or config.json's quantization_config
// with quant_method "modelopt" (the same keys; "ignore" read as vLLM reads it, when there is no
// exclude_modules).
Quantization from_modelopt(const JsonKey& qc) {
  Quantization q;
  q.method = Quantization::Method::kFp8;
  q.source = "modelopt";
  const JsonKey algo = qc.at("quant_algo");
  if (algo.absent()) {
    refuse(algo,
           "ModelOpt checkpoints are supported with quant_algo \"FP8\" (KV-cache-only "
           "quantization is not)");
  }
  if (algo.str() != "FP8") refuse(algo, "only ModelOpt quant_algo \"FP8\" is supported");
  q.weights = Quantization::WeightScales::kTensor;
  q.activations = Quantization::ActivationScales::kStaticTensor;
  const JsonKey kv = qc.at("kv_cache_quant_algo");
  if (!kv.absent()) {
    if (kv.str() != "FP8") refuse(kv, "only kv_cache_quant_algo \"FP8\" (or null) is supported");
    q.kv_cache_scales = true;
    q.fp8_kv_cache = true;
  }
  const JsonKey exclude = qc.at("exclude_modules").absent() && !qc.at("ignore").absent()
                              ? qc.at("ignore")
                              : qc.at("exclude_modules");
  q.ignore = exclude.strings();
  check_ignore_patterns(exclude, q.ignore);
  return q;
}

// The last dot-separated component of a module name.
std::string_view last_component(std::string_view module) {
  const size_t dot = module.rfind('.');
  return dot == std::string_view::npos ? module : module.substr(dot + 1);
}

// NOTE: std::regex backtracks without a limit: a hostile pattern ("(.*)*x") can take time
// exponential in the module name's length (tens of characters). Names are short and patterns
// come from the checkpoint the user chose to load; PCRE2 with a match limit would bound it.
bool ignore_matches(const std::string& entry, const std::string& module) {
  if (entry.rfind("re:", 0) == 0) {
    return std::regex_match(module, std::regex(entry.substr(3), std::regex::ECMAScript));
  }
  if (entry == module) return true;
  if (entry.find_first_of("*?[") != std::string::npos) {
    return ::fnmatch(entry.c_str(), module.c_str(), 0) == 0;
  }
  return entry.find('.') == std::string::npos && last_component(module) == entry;
}

std::string_view weights_name(Quantization::WeightScales w) {
  switch (w) {
    case Quantization::WeightScales::kTensor:
      return "per tensor";
    case Quantization::WeightScales::kChannel:
      return "per channel";
    case Quantization::WeightScales::kBlock:
      return "in blocks";
  }
  return "?";
}

}  // namespace

bool Quantization::quantizes(std::string_view module_view) const {
  if (!enabled()) return false;
  const std::string module(module_view);
  const std::string_view last = last_component(module);
  if (last == "lm_head" || last == "embed_tokens") return false;
  for (const std::string& entry : ignore) {
    if (ignore_matches(entry, module)) return false;
  }
  return true;
}

std::string Quantization::describe() const {
  std::string out;
  if (enabled()) {
    out = fmt::format("fp8 ({}): weights {}", source, weights_name(weights));
    if (weights == WeightScales::kBlock) out += fmt::format(" of {}x{}", block_rows, block_cols);
    switch (activations) {
      case ActivationScales::kDynamicToken:
        out += ", activations dynamic per token";
        break;
      case ActivationScales::kDynamicGroup:
        out += fmt::format(", activations dynamic per token and {} columns", block_cols);
        break;
      case ActivationScales::kStaticTensor:
        out += ", activations static per tensor";
        break;
    }
    if (!ignore.empty()) out += fmt::format(", {} ignore entries", ignore.size());
  }
  if (fp8_kv_cache) {
    out += std::string(out.empty() ? "" : ", ") +
           "KV cache fp8 e4m3 with a scale per token and kv head";
    // The cache measures each vector's range as it is written (docs/quantization.md).
    if (kv_cache_scales) out += " (the checkpoint's static k_scale/v_scale are not used)";
  }
  return out.empty() ? "none" : out;
}

Quantization Quantization::online_fp8(WeightScales weights) {
  Quantization q;
  q.method = Method::kFp8;
  q.source = "online";
  q.weights = weights;
  q.activations = ActivationScales::kDynamicToken;
  if (weights == WeightScales::kBlock) {
    q.block_rows = q.block_cols = 128;
    q.activations = ActivationScales::kDynamicGroup;
  }
  return q;
}

const std::vector<std::string>& Quantization::online_names() {
  static const std::vector<std::string> names = {"fp8", "fp8-channel", "fp8-tensor", "fp8-block"};
  return names;
}

Quantization Quantization::online(std::string_view name) {
  if (name == "fp8" || name == "fp8-channel") return online_fp8(WeightScales::kChannel);
  if (name == "fp8-tensor") return online_fp8(WeightScales::kTensor);
  if (name == "fp8-block") return online_fp8(WeightScales::kBlock);
  INFLIGHT_THROW(ErrorCode::kInvalidArgument,
                 "quantization '{}' is not supported (supported: fp8 = fp8-channel, fp8-tensor, "
                 "fp8-block)",
                 name);
}

Quantization Quantization::from_hf(const json& config, const json* hf_quant_config) {
  // config.json's quantization_config, when there is one, is the checkpoint's own statement;
  // hf_quant_config.json (ModelOpt) counts where config.json has none.
  const JsonKey qc = JsonKey(&config, "config.json", "").at("quantization_config");
  if (!qc.absent()) {
    qc.object();
    const JsonKey method = qc.at("quant_method");
    const std::string name = method.require().str();
    if (name == "compressed-tensors") return from_compressed_tensors(qc);
    if (name == "fp8") return from_native_fp8(qc);
    if (name == "modelopt") return from_modelopt(qc);
    refuse(method,
           "supported quantizations are FP8 checkpoints of compressed-tensors, fp8 and "
           "modelopt");
  }
  if (hf_quant_config != nullptr && !hf_quant_config->is_null()) {
    const JsonKey root(hf_quant_config, "hf_quant_config.json", "");
    INFLIGHT_CHECK_CODE(hf_quant_config->is_object(), ErrorCode::kInvalidFile,
                        "hf_quant_config.json: top level must be an object");
    return from_modelopt(root.at("quantization").require().object());
  }
  return {};
}

}  // namespace inflight
