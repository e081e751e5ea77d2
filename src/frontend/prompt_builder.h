// From a request's prompt (text, token ids, or chat messages) to the engine request that runs
// it. Every generation request goes through build_engine_request, the one place where a
// prompt is checked against the model's context length.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/loaded_model.h"
#include "frontend/openai_protocol.h"
#include "inflight/request.h"

namespace inflight::frontend {

struct ChatPromptOptions {
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  nlohmann::ordered_json tools;                 // null when absent
  nlohmann::ordered_json chat_template_kwargs;  // object or null
};

// Renders the chat template over `messages` (ApiError 400 when the model has none or the
// template rejects the conversation).
std::string render_chat_prompt(const LoadedModel& model, const nlohmann::ordered_json& messages,
                               const ChatPromptOptions& options);

// The token ids of a chat prompt: render_chat_prompt, then tokenize. With
// LoadedModel::content_special_tokens_as_text, message contents that contain special-token text
// are tokenized with it taken literally while the template's markers stay special; ApiError 400
// when the template changes or repeats a content (it cannot be told apart from the template).
std::vector<int32_t> tokenize_chat(const LoadedModel& model, const nlohmann::ordered_json& messages,
                                   const ChatPromptOptions& options, bool add_special_tokens);

// Text -> ids; special tokens written in the text are recognised (as Hugging Face tokenizers
// do), `add_special_tokens` adds BOS/EOS as the tokenizer is configured to.
std::vector<int32_t> tokenize(const LoadedModel& model, const std::string& text,
                              bool add_special_tokens);

// The engine request for a prompt: text is tokenized (tokenize above), token ids are taken as
// they are. ApiError 400, in vLLM's words, when the prompt leaves no room for the output:
// prompt_len >= max_model_len, or prompt_len + sampling.max_tokens > max_model_len.
Request build_engine_request(const LoadedModel& model, const PromptInput& prompt,
                             bool add_special_tokens, const SamplingParams& sampling);

}  // namespace inflight::frontend
