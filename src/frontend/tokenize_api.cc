#include "frontend/tokenize_api.h"

#include "frontend/api_error.h"
#include "frontend/json_fields.h"
#include "frontend/openai_protocol.h"
#include "frontend/prompt_builder.h"
#include "tokenizer/tokenizer.h"

namespace inflight::frontend {

using json = nlohmann::ordered_json;

json tokenize_request(const Frontend& frontend, std::string_view body_text) {
  const LoadedModel& model = frontend.model();
  json body = parse_json_object(body_text);
  FieldReader r(body);
  frontend.check_model(r.string("model").value_or(""));
  std::vector<int32_t> ids;
  if (r.get("messages") != nullptr) {
    ChatCompletionRequest chat = parse_chat_completion_request(body, model.limits);
    ChatPromptOptions options{chat.add_generation_prompt, chat.continue_final_message,
                              chat.tools, chat.chat_template_kwargs};
    ids = tokenize_chat(model, chat.messages, options, chat.add_special_tokens);
  } else {
    std::optional<std::string> prompt = r.string("prompt");
    if (!prompt) throw_bad_request("'prompt' or 'messages' is required", "prompt");
    ids = tokenize(model, *prompt, r.boolean("add_special_tokens").value_or(true));
  }
  json token_strs = nullptr;
  if (r.boolean("return_token_strs").value_or(false)) {
    token_strs = json::array();
    for (int32_t id : ids) token_strs.push_back(model.tokenizer->token_piece(id, false));
  }
  return {{"count", ids.size()},
          {"max_model_len", model.max_model_len},
          {"tokens", ids},
          {"token_strs", std::move(token_strs)}};
}

json detokenize_request(const Frontend& frontend, std::string_view body_text) {
  const LoadedModel& model = frontend.model();
  json body = parse_json_object(body_text);
  FieldReader r(body);
  frontend.check_model(r.string("model").value_or(""));
  if (r.get("tokens") == nullptr) throw_bad_request("'tokens' is required", "tokens");
  std::vector<int32_t> ids = r.int_list("tokens", 0, model.limits.vocab_size - 1);
  return {{"prompt", model.tokenizer->decode(ids, false)}};
}

}  // namespace inflight::frontend
