// POST /v1/completions, POST /v1/chat/completions, GET /v1/models.
#include "server/api_error.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/openai_protocol.h"
#include "server/openai_responses.h"
#include "server/prompt_builder.h"
#include "server/routes.h"
#include "server/sse.h"
#include "tokenizer/tokenizer.h"

namespace inflight::server {

using json = nlohmann::ordered_json;

HttpResponse sse_response(std::shared_ptr<StreamBody> body) {
  HttpResponse res;
  res.content_type = std::string(kSseContentType);
  res.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  res.stream = std::move(body);
  return res;
}

namespace {

ResponseMeta make_meta(const ServerContext& ctx, std::string_view prefix) {
  return ResponseMeta{new_response_id(prefix), unix_now(), ctx.options().served_model_name,
                      ctx.system_fingerprint()};
}

HttpResponse completions(ServerContext& ctx, const HttpRequest& http) {
  const LoadedModel& model = ctx.model();
  json body = parse_json_object(http.body);
  CompletionRequest req = parse_completion_request(body, model.limits);
  ctx.check_model(req.options.model);
  if (req.echo && req.logprobs) {
    throw_bad_request("'echo' together with 'logprobs' is not supported", "echo");
  }
  std::vector<Request> requests;
  CompletionFormat format;
  for (auto& prompt : req.prompts) {
    Request r;
    r.sampling = req.options.sampling;
    bool is_tokens = prompt.is_tokens();
    r.prompt_token_ids = is_tokens ? std::move(prompt.token_ids)
                                   : tokenize(model, prompt.text, req.add_special_tokens);
    check_context_length(model, r.prompt_token_ids.size(), r.sampling.max_tokens);
    if (req.echo) {
      format.echo.push_back(is_tokens ? model.tokenizer->decode(r.prompt_token_ids, false)
                                      : prompt.text);
    }
    requests.push_back(std::move(r));
  }
  format.tokenizer = model.tokenizer.get();
  format.meta = make_meta(ctx, "cmpl-");
  format.n = req.options.sampling.n;
  format.logprobs = req.logprobs;
  format.include_usage = req.options.include_usage;

  auto generation = Generation::submit(ctx, std::move(requests));
  if (req.options.stream) {
    return sse_response(std::make_shared<GenerationStream>(
        std::move(generation), completion_stream_formatter(std::move(format))));
  }
  HttpResponse res;
  res.deferred = std::make_shared<GenerationCollector>(
      std::move(generation), format.n,
      [format](GenerationResult& result) { return completion_response(format, result); });
  return res;
}

HttpResponse chat_completions(ServerContext& ctx, const HttpRequest& http) {
  const LoadedModel& model = ctx.model();
  json body = parse_json_object(http.body);
  ChatCompletionRequest req = parse_chat_completion_request(body, model.limits);
  ctx.check_model(req.options.model);
  ChatPromptOptions options{req.add_generation_prompt, req.continue_final_message, req.tools,
                            req.chat_template_kwargs};
  std::string prompt = render_chat_prompt(model, req.messages, options);
  Request r;
  r.sampling = req.options.sampling;
  r.prompt_token_ids = tokenize(model, prompt, req.add_special_tokens);
  check_context_length(model, r.prompt_token_ids.size(), r.sampling.max_tokens);

  ChatFormat format;
  format.tokenizer = model.tokenizer.get();
  format.meta = make_meta(ctx, "chatcmpl-");
  format.n = req.options.sampling.n;
  format.logprobs = req.logprobs;
  format.top_logprobs = req.top_logprobs;
  format.include_usage = req.options.include_usage;
  if (!req.tools.is_null() && !req.tools.empty() && !req.tool_choice_none) {
    format.tool_parser = ctx.options().tool_call_parser;
  }

  std::vector<Request> requests;
  requests.push_back(std::move(r));
  auto generation = Generation::submit(ctx, std::move(requests));
  if (req.options.stream) {
    std::string prologue = chat_stream_prologue(format, static_cast<size_t>(format.n));
    return sse_response(std::make_shared<GenerationStream>(
        std::move(generation), chat_stream_formatter(format), std::move(prologue)));
  }
  HttpResponse res;
  res.deferred = std::make_shared<GenerationCollector>(
      std::move(generation), format.n,
      [format](GenerationResult& result) { return chat_completion_response(format, result); });
  return res;
}

json model_card(ServerContext& ctx) {
  const LoadedModel& model = ctx.model();
  const std::string& name = ctx.options().served_model_name;
  return {{"id", name},
          {"object", "model"},
          {"created", ctx.created()},
          {"owned_by", "inflight"},
          {"root", name},
          {"parent", nullptr},
          {"max_model_len", model.max_model_len}};
}

HttpResponse models(ServerContext& ctx) {
  HttpResponse res;
  res.body = dump_json({{"object", "list"}, {"data", json::array({model_card(ctx)})}});
  return res;
}

HttpResponse model(ServerContext& ctx) {
  HttpResponse res;
  res.body = dump_json(model_card(ctx));
  return res;
}

}  // namespace

void add_openai_routes(Router& router, ServerContext& ctx) {
  router.add("POST", "/v1/completions",
             [&ctx](const HttpRequest& r) { return completions(ctx, r); }, true);
  router.add("POST", "/v1/chat/completions",
             [&ctx](const HttpRequest& r) { return chat_completions(ctx, r); }, true);
  router.add("GET", "/v1/models", [&ctx](const HttpRequest&) { return models(ctx); }, true);
  // GET /v1/models/{id}: only the served model exists; any other id is an unknown route (404).
  router.add("GET", "/v1/models/" + ctx.options().served_model_name,
             [&ctx](const HttpRequest&) { return model(ctx); }, true);
}

}  // namespace inflight::server
