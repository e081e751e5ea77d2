// POST /tokenize and POST /detokenize, in vLLM's shapes:
//
//   {"prompt": "text", "add_special_tokens": true, "return_token_strs": false}
//   {"messages": [...], "add_generation_prompt": true, "add_special_tokens": false}
//     -> {"count": N, "max_model_len": M, "tokens": [...], "token_strs": null | [...]}
//   {"tokens": [...]} -> {"prompt": "text"}
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/openai_protocol.h"
#include "server/openai_responses.h"
#include "server/prompt_builder.h"
#include "server/routes.h"
#include "tokenizer/tokenizer.h"

namespace inflight::server {

using json = nlohmann::ordered_json;

namespace {

HttpResponse tokenize_route(ServerContext& ctx, const HttpRequest& http) {
  const LoadedModel& model = ctx.model();
  json body = parse_json_object(http.body);
  FieldReader r(body);
  ctx.check_model(r.string("model").value_or(""));
  std::vector<int32_t> ids;
  if (r.get("messages") != nullptr) {
    ChatCompletionRequest chat = parse_chat_completion_request(body, model.limits);
    ChatPromptOptions options{chat.add_generation_prompt, chat.continue_final_message,
                              chat.tools, chat.chat_template_kwargs};
    ids = tokenize(model, render_chat_prompt(model, chat.messages, options),
                   chat.add_special_tokens);
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
  HttpResponse res;
  res.body = dump_json({{"count", ids.size()},
                        {"max_model_len", model.max_model_len},
                        {"tokens", ids},
                        {"token_strs", std::move(token_strs)}});
  return res;
}

HttpResponse detokenize_route(ServerContext& ctx, const HttpRequest& http) {
  const LoadedModel& model = ctx.model();
  json body = parse_json_object(http.body);
  FieldReader r(body);
  ctx.check_model(r.string("model").value_or(""));
  if (r.get("tokens") == nullptr) throw_bad_request("'tokens' is required", "tokens");
  std::vector<int32_t> ids = r.int_list("tokens", 0, model.limits.vocab_size - 1);
  HttpResponse res;
  res.body = dump_json({{"prompt", model.tokenizer->decode(ids, false)}});
  return res;
}

}  // namespace

void add_tokenize_routes(Router& router, ServerContext& ctx) {
  router.add("POST", "/tokenize",
             [&ctx](const HttpRequest& r) { return tokenize_route(ctx, r); }, true);
  router.add("POST", "/detokenize",
             [&ctx](const HttpRequest& r) { return detokenize_route(ctx, r); }, true);
}

}  // namespace inflight::server
