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

// Whether `text` holds special-token text (it tokenizes differently with specials parsed).
bool has_special_text(const Tokenizer& tok, const std::string& text) {
  return tok.encode(text, false, true) != tok.encode(text, false, false);
}

// A marker no template writes: U+E000, the content's index, U+E001 (private use characters).
std::string content_marker(size_t index) {
  return "\xEE\x80\x80" + std::to_string(index) + "\xEE\x80\x81";
}

}  // namespace

std::vector<int32_t> tokenize_chat(const LoadedModel& model, const json& messages,
                                   const ChatPromptOptions& options, bool add_special_tokens) {
  const Tokenizer& tok = *model.tokenizer;
  bool literal = false;
  if (model.content_special_tokens_as_text) {
    for (const json& m : messages) {
      const auto c = m.find("content");
      literal = literal || (c != m.end() && c->is_string() &&
                            has_special_text(tok, c->get_ref<const std::string&>()));
    }
  }
  if (!literal) {
    return tokenize(model, render_chat_prompt(model, messages, options), add_special_tokens);
  }
  // Render with each content replaced by a marker, then tokenize the template's text with
  // special tokens parsed and each content, spliced back at its marker, as plain text.
  json marked = messages;
  std::vector<std::string> contents;
  for (json& m : marked) {
    const auto c = m.find("content");
    if (c == m.end() || !c->is_string()) continue;
    contents.push_back(c->get<std::string>());
    *c = content_marker(contents.size() - 1);
  }
  const std::string text = render_chat_prompt(model, marked, options);
  std::vector<int32_t> ids;
  // What add_special_tokens adds (BOS) comes with the first part only.
  bool first = true;
  const auto append = [&](std::string_view part, bool parse_special) {
    const std::vector<int32_t> more = tok.encode(part, add_special_tokens && first, parse_special);
    ids.insert(ids.end(), more.begin(), more.end());
    first = false;
  };
  size_t at = 0;
  for (size_t i = 0; i < contents.size(); ++i) {
    const std::string marker = content_marker(i);
    const size_t pos = text.find(marker, at);
    if (pos == std::string::npos || text.find(marker, pos + marker.size()) != std::string::npos) {
      throw_bad_request("the chat template changes or repeats message contents, so special-token "
                        "text in them cannot be kept literal (--chat-content-special-tokens text)",
                        "messages");
    }
    append(std::string_view(text).substr(at, pos - at), true);
    append(contents[i], false);
    at = pos + marker.size();
  }
  append(std::string_view(text).substr(at), true);
  return ids;
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
