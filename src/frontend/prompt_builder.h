// From a request's prompt (text, token ids, or chat messages) to the token ids the engine
// runs, checked against the model's context length.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/loaded_model.h"

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

// Text -> ids; special tokens written in the text are recognised (as Hugging Face tokenizers
// do), `add_special_tokens` adds BOS/EOS as the tokenizer is configured to.
std::vector<int32_t> tokenize(const LoadedModel& model, const std::string& text,
                              bool add_special_tokens);

// ApiError 400, in vLLM's words, when the prompt leaves no room for the output: prompt_len >=
// max_model_len, or prompt_len + max_tokens > max_model_len.
void check_context_length(const LoadedModel& model, size_t prompt_len,
                          std::optional<int32_t> max_tokens);

}  // namespace inflight::frontend
