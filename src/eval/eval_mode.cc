#include "eval/eval_mode.h"

#include <algorithm>

#include "core/check.h"

namespace inflight::eval {
namespace {

constexpr const char* kValid =
    "weights base | fp8-tensor | fp8-channel | fp8-block, optionally followed by +kv-auto | "
    "+kv-bf16 | +kv-fp8";

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

EvalMode parse_eval_mode(std::string_view text) {
  text = trim(text);
  std::string_view weights = text, kv;
  if (const size_t plus = text.find('+'); plus != std::string_view::npos) {
    weights = text.substr(0, plus);
    kv = text.substr(plus + 1);
  }
  if (weights.starts_with("kv-") && kv.empty()) {  // "kv-fp8": the KV cache alone
    kv = weights;
    weights = "base";
  }
  EvalMode mode;
  if (weights == "fp8") weights = "fp8-channel";  // the --quantization name of the default
  if (weights == "fp8-tensor" || weights == "fp8-channel" || weights == "fp8-block") {
    mode.quantization = std::string(weights);
  } else {
    INFLIGHT_CHECK_CODE(weights == "base", ErrorCode::kInvalidArgument,
                        "eval mode '{}': unknown weights '{}' (valid: {})", text, weights, kValid);
  }
  if (!kv.empty() || text.find('+') != std::string_view::npos) {
    INFLIGHT_CHECK_CODE(kv == "kv-auto" || kv == "kv-bf16" || kv == "kv-fp8",
                        ErrorCode::kInvalidArgument,
                        "eval mode '{}': unknown KV cache '{}' (valid: {})", text, kv, kValid);
    mode.kv_cache_dtype = std::string(kv.substr(3));
  }
  mode.name = std::string(weights);
  if (mode.kv_cache_dtype != "auto") mode.name += "+kv-" + mode.kv_cache_dtype;
  return mode;
}

std::vector<EvalMode> parse_eval_modes(std::string_view list) {
  std::vector<EvalMode> modes;
  size_t begin = 0;
  while (begin <= list.size()) {
    const size_t comma = std::min(list.find(',', begin), list.size());
    const std::string_view entry = trim(list.substr(begin, comma - begin));
    INFLIGHT_CHECK_CODE(!entry.empty(), ErrorCode::kInvalidArgument,
                        "--modes '{}': an empty entry (valid modes: {})", list, kValid);
    EvalMode mode = parse_eval_mode(entry);
    for (const EvalMode& m : modes) {
      INFLIGHT_CHECK_CODE(m.name != mode.name, ErrorCode::kInvalidArgument,
                          "--modes '{}': '{}' is named twice", list, mode.name);
    }
    modes.push_back(std::move(mode));
    begin = comma + 1;
  }
  return modes;
}

}  // namespace inflight::eval
