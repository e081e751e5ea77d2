// OpenAI-compatible request parsing and validation (POST /v1/completions and
// /v1/chat/completions), into typed structs the routes turn into engine requests.
//
// Accepted fields: OpenAI's (model, prompt/messages, max_tokens, max_completion_tokens,
// temperature, top_p, n, stop, seed, stream, stream_options.include_usage, logprobs,
// top_logprobs, presence_penalty, frequency_penalty, user, echo, best_of == n) plus vLLM's
// extras (top_k, min_p, repetition_penalty, ignore_eos, min_tokens, stop_token_ids,
// skip_special_tokens, include_stop_str_in_output, add_special_tokens, chat_template_kwargs,
// add_generation_prompt, continue_final_message) and the structured-output fields
// (structured_output_fields.h). Other fields are logged once per name or, with
// ProtocolLimits::reject_unknown_fields, refused (frontend/request_fields.h).
// Anything of the wrong type or out of range is ApiError(400) naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/structured_output_fields.h"
#include "inflight/sampling_params.h"

namespace inflight::frontend {

// Limits that depend on the server and the model, used during validation.
struct ProtocolLimits {
  int32_t max_n = 128;        // most choices per request
  int32_t max_logprobs = 20;  // engine's max_logprobs
  int32_t max_stop = 16;      // most stop strings
  int64_t vocab_size = 1 << 30;
  // Answer 400 to a body with a field this server does not read (serve --strict); otherwise
  // such fields are logged once each (frontend/request_fields.h).
  bool reject_unknown_fields = false;
};

// Fields every generation request shares.
struct GenerationOptions {
  std::string model;  // empty when the client sent none
  SamplingParams sampling;
  // The output constraint (also in sampling.structured_output), with the field it came from.
  std::optional<ParsedConstraint> constraint;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;
};

struct PromptInput {
  std::string text;  // when token_ids is empty
  std::vector<int32_t> token_ids;
  bool is_tokens() const { return !token_ids.empty(); }
};

struct CompletionRequest {
  GenerationOptions options;
  std::vector<PromptInput> prompts;  // one engine request each; at least one
  bool echo = false;                 // prepend the prompt to each choice's text
  bool add_special_tokens = true;    // text prompts: let the tokenizer add BOS etc.
  std::optional<int32_t> logprobs;   // completions' integer logprobs
};

struct ChatCompletionRequest {
  GenerationOptions options;
  nlohmann::ordered_json messages;  // normalised: content is a string (text parts joined)
  nlohmann::ordered_json tools;     // null when absent
  bool tool_choice_none = false;    // tool_choice "none": tools are shown, no call is parsed
  // tool_choice "required" or named: the output is a JSON list of calls (options.constraint).
  bool tool_choice_forced = false;
  nlohmann::ordered_json chat_template_kwargs;  // object (possibly empty)
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool add_special_tokens = false;  // the template writes BOS itself
  bool logprobs = false;
  int32_t top_logprobs = 0;
};

CompletionRequest parse_completion_request(const nlohmann::ordered_json& body,
                                           const ProtocolLimits& limits);
ChatCompletionRequest parse_chat_completion_request(const nlohmann::ordered_json& body,
                                                    const ProtocolLimits& limits);

}  // namespace inflight::frontend
