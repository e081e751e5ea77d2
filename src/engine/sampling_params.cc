#include "inflight/sampling_params.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace inflight {
namespace {

Status invalid(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}

}  // namespace

Status SamplingParams::validate() const {
  if (n < 1) return invalid(fmt::format("n must be >= 1, got {}", n));
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return invalid(fmt::format("temperature must be a finite number >= 0, got {}", temperature));
  }
  if (top_k < -1) return invalid(fmt::format("top_k must be -1, 0 (all) or >= 1, got {}", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return invalid(fmt::format("top_p must be in (0, 1], got {}", top_p));
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return invalid(fmt::format("min_p must be in [0, 1], got {}", min_p));
  }
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0f) {
    return invalid(
        fmt::format("repetition_penalty must be > 0 (1 = off), got {}", repetition_penalty));
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return invalid(fmt::format("frequency_penalty must be in [-2, 2], got {}", frequency_penalty));
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return invalid(fmt::format("presence_penalty must be in [-2, 2], got {}", presence_penalty));
  }
  if (max_tokens && *max_tokens < 1) {
    return invalid(fmt::format("max_tokens must be >= 1, got {}", *max_tokens));
  }
  if (min_tokens < 0) return invalid(fmt::format("min_tokens must be >= 0, got {}", min_tokens));
  if (max_tokens && min_tokens > *max_tokens) {
    return invalid(
        fmt::format("min_tokens ({}) must not exceed max_tokens ({})", min_tokens, *max_tokens));
  }
  for (const auto& s : stop) {
    if (s.empty()) return invalid("stop strings must not be empty");
  }
  std::vector<int32_t> biased;
  biased.reserve(logit_bias.size());
  for (const auto& [token, bias] : logit_bias) {
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      return invalid(
          fmt::format("logit_bias of token {} must be in [-100, 100], got {}", token, bias));
    }
    biased.push_back(token);
  }
  std::sort(biased.begin(), biased.end());
  if (const auto twice = std::adjacent_find(biased.begin(), biased.end()); twice != biased.end()) {
    return invalid(fmt::format("logit_bias lists token {} twice", *twice));
  }
  if (logprobs && *logprobs < 0) {
    return invalid(fmt::format("logprobs must be >= 0, got {}", *logprobs));
  }
  if (prompt_logprobs && *prompt_logprobs < 0) {
    return invalid(fmt::format("prompt_logprobs must be >= 0, got {}", *prompt_logprobs));
  }
  if (structured_output) {
    const StructuredOutput& c = *structured_output;
    using Kind = StructuredOutput::Kind;
    if (c.kind == Kind::kChoice && c.choices.empty()) {
      return invalid("structured output: a choice constraint needs at least one choice");
    }
    if ((c.kind == Kind::kJsonSchema || c.kind == Kind::kRegex || c.kind == Kind::kGrammar) &&
        c.text.empty()) {
      return invalid(
          fmt::format("structured output: the {} is empty", structured_output_kind_name(c.kind)));
    }
  }
  return {};
}

}  // namespace inflight
