#include "frontend/prompt_builder.h"

#include <fmt/format.h>

#include "core/check.h"
#include "frontend/api_error.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace inflight::frontend {

using json = nlohmann::ordered_json;

std::string render_chat_prompt(const LoadedModel& model, const json& messages,
                               const ChatPromptOptions& options) {
  if (!model.chat_template) {
    throw_bad_request("this model has no chat template; start the server with --chat-template, "
                      "or use /v1/completions");
  }
  json context = json::object();
  if (options.chat_template_kwargs.is_object()) context = options.chat_template_kwargs;
  context["messages"] = messages;
  context["add_generation_prompt"] = options.add_generation_prompt;
  context["bos_token"] = model.bos_token;
  context["eos_token"] = model.eos_token;
  if (!options.tools.is_null()) context["tools"] = options.tools;
  std::string prompt;
  try {
    prompt = model.chat_template->render(context);
  } catch (const Error& e) {
    throw_bad_request("chat template: " + e.message(), "messages");
  }
  if (options.continue_final_message) {
    // Cut what the template wrote after the last message (its end-of-turn marker), so the
    // model continues that message.
    const json& last = messages.back();
    const std::string& content = last["content"].get_ref<const std::string&>();
    size_t at = content.empty() ? std::string::npos : prompt.rfind(content);
    if (at == std::string::npos) {
      throw_bad_request("continue_final_message: the final message's content is not in the "
                        "rendered prompt",
                        "messages");
    }
    prompt.resize(at + content.size());
  }
  return prompt;
}

std::vector<int32_t> tokenize(const LoadedModel& model, const std::string& text,
                              bool add_special_tokens) {
  return model.tokenizer->encode(text, add_special_tokens, /*parse_special=*/true);
}

namespace {

void check_context_length(const LoadedModel& model, size_t prompt_len,
                          std::optional<int32_t> max_tokens) {
  auto limit = static_cast<size_t>(model.max_model_len);
  if (prompt_len >= limit) {
    throw_bad_request(fmt::format("This model's maximum context length is {} tokens. However, "
                                  "your request has {} input tokens. Please reduce the length "
                                  "of the input messages.",
                                  limit, prompt_len),
                      "messages");
  }
  if (max_tokens && prompt_len + static_cast<size_t>(*max_tokens) > limit) {
    throw_bad_request(fmt::format("This model's maximum context length is {} tokens. However, "
                                  "you requested {} tokens ({} in the messages, {} in the "
                                  "completion). Please reduce the length of the messages or "
                                  "completion.",
                                  limit, prompt_len + static_cast<size_t>(*max_tokens),
                                  prompt_len, *max_tokens),
                      "max_tokens");
  }
}

}  // namespace

Request build_engine_request(const LoadedModel& model, const PromptInput& prompt,
                             bool add_special_tokens, const SamplingParams& sampling) {
  Request r;
  r.sampling = sampling;
  r.prompt_token_ids = prompt.is_tokens() ? prompt.token_ids
                                          : tokenize(model, prompt.text, add_special_tokens);
  check_context_length(model, r.prompt_token_ids.size(), r.sampling.max_tokens);
  return r;
}

}  // namespace inflight::frontend
