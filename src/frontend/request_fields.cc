#include "frontend/request_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <string>

#include "core/logging.h"
#include "frontend/api_error.h"

namespace inflight::frontend {

namespace {

using json = nlohmann::ordered_json;

// Fields both OpenAI generation routes read: OpenAI's sampling and output controls and vLLM's.
constexpr std::string_view kOpenAi[] = {"model",
                                        "max_tokens",
                                        "temperature",
                                        "top_p",
                                        "n",
                                        "best_of",
                                        "stream",
                                        "stream_options",
                                        "stop",
                                        "presence_penalty",
                                        "frequency_penalty",
                                        "logit_bias",
                                        "logprobs",
                                        "user",
                                        "seed",
                                        "response_format",
                                        "top_k",
                                        "min_p",
                                        "repetition_penalty",
                                        "ignore_eos",
                                        "min_tokens",
                                        "stop_token_ids",
                                        "skip_special_tokens",
                                        "include_stop_str_in_output",
                                        "add_special_tokens",
                                        // structured output (structured_output_fields.h)
                                        "guided_json",
                                        "guided_regex",
                                        "guided_choice",
                                        "guided_grammar",
                                        "structured_outputs",
                                        "prompt_logprobs"};
constexpr std::string_view kCompletion[] = {"prompt", "echo", "suffix"};
constexpr std::string_view kChat[] = {
    "messages",    "max_completion_tokens", "top_logprobs",          "tools",
    "tool_choice", "chat_template_kwargs",  "add_generation_prompt", "continue_final_message"};
constexpr std::string_view kTgi[] = {"inputs", "parameters", "stream"};
constexpr std::string_view kTgiParameters[] = {
    "best_of",      "decoder_input_details", "details",        "do_sample",          "frequency_penalty",
    "grammar",      "max_new_tokens", "repetition_penalty", "return_full_text",
    "seed",         "stop",           "temperature",        "top_k",
    "top_n_tokens", "top_p",          "truncate",           "typical_p",
    "watermark"};

const char* api_name(RequestApi api) {
  switch (api) {
    case RequestApi::kCompletion:
      return "completions";
    case RequestApi::kChatCompletion:
      return "chat completions";
    case RequestApi::kTgi:
      return "TGI generate";
  }
  return "";
}

// Warns once per (api, field) for the process's lifetime.
void warn_once(RequestApi api, const std::string& field) {
  static std::mutex mutex;
  static std::set<std::pair<int, std::string>> warned;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!warned.emplace(static_cast<int>(api), field).second) return;
  }
  INFLIGHT_LOG_WARN(
      "{} request field '{}' is not supported and was ignored (logged once; serve --strict "
      "refuses such requests)",
      api_name(api), field);
}

bool contains(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

void check_object(const json& object, std::span<const std::string_view> known,
                  std::string_view prefix, RequestApi api, const ProtocolLimits& limits) {
  for (const auto& [key, value] : object.items()) {
    if (contains(known, key) ||
        (api != RequestApi::kTgi && prefix.empty() && contains(kOpenAi, key))) {
      continue;
    }
    const std::string field = fmt::format("{}{}", prefix, key);
    if (limits.reject_unknown_fields) {
      throw_bad_request(
          fmt::format("unknown field '{}': this server does not support it (--strict)", field),
          field);
    }
    warn_once(api, field);
  }
}

}  // namespace

std::span<const std::string_view> known_openai_fields() {
  return kOpenAi;
}

std::span<const std::string_view> known_fields(RequestApi api) {
  switch (api) {
    case RequestApi::kCompletion:
      return kCompletion;
    case RequestApi::kChatCompletion:
      return kChat;
    case RequestApi::kTgi:
      return kTgi;
  }
  return {};
}

std::span<const std::string_view> known_tgi_parameters() {
  return kTgiParameters;
}

void check_fields(const json& body, RequestApi api, const ProtocolLimits& limits) {
  check_object(body, known_fields(api), "", api, limits);
  if (api == RequestApi::kTgi) {
    auto params = body.find("parameters");
    if (params != body.end() && params->is_object()) {
      check_object(*params, kTgiParameters, "parameters.", api, limits);
    }
  }
}

}  // namespace inflight::frontend
