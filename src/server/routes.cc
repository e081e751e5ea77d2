#include "server/routes.h"

#include "frontend/json_fields.h"
#include "frontend/openai_api.h"
#include "frontend/tgi_api.h"
#include "frontend/tokenize_api.h"
#include "server/assets/assets.h"
#include "server/generation_adapters.h"
#include "server/http_responses.h"
#include "server/kserve_routes.h"
#include "server/metrics.h"
#include "server/static_pages.h"

namespace inflight::server {

namespace {

using frontend::ModelRegistry;

// 200 with an empty body once the start-up models are loaded (as vLLM), 503 before.
HttpResponse health(const ModelRegistry& registry) {
  if (!registry.ready()) return error_response(503, "the model is still loading");
  HttpResponse res;
  res.content_type = "text/plain";
  return res;
}

HttpResponse metrics(const ModelRegistry& registry, const std::string& prefix,
                     const std::function<HttpServerStats()>& http_stats) {
  std::vector<ModelMetrics> models;
  for (const auto& fe : registry.frontends()) models.push_back(model_metrics(*fe));
  HttpResponse res;
  res.content_type = std::string(kMetricsContentType);
  res.body = render_metrics(models, http_stats(), prefix);
  return res;
}

HttpResponse version() {
  HttpResponse res;
  res.body = R"({"version":"0.1.0"})";
  return res;
}

// The model a JSON body names in `model`. With one model in the registry that model, whatever
// the body says (the API call checks the name), so a one-model server parses the body once.
std::shared_ptr<frontend::Frontend> model_of_body(const ModelRegistry& registry,
                                                  std::string_view body) {
  if (registry.size() == 1) return registry.resolve("");
  const auto j = frontend::parse_json_object(body);
  const auto it = j.find("model");
  return registry.resolve(it != j.end() && it->is_string() ? it->get<std::string>()
                                                           : std::string());
}

// /models/{model}[/{action}] (the TGI routes of one model of several).
std::pair<std::string, std::string> model_path(std::string_view path) {
  path.remove_prefix(std::string_view("/models/").size());
  const size_t slash = path.find('/');
  if (slash == std::string_view::npos) return {std::string(path), ""};
  return {std::string(path.substr(0, slash)), std::string(path.substr(slash + 1))};
}

}  // namespace

void add_routes(Router& router, ModelRegistry& registry, std::string metrics_prefix,
                std::function<HttpServerStats()> http_stats, bool explicit_model_control) {
  using frontend::start_chat_completion, frontend::start_completion, frontend::start_tgi_generation;
  ModelRegistry& r = registry;
  // OpenAI.
  router.add(
      "POST", "/v1/completions",
      [&r](const HttpRequest& req) {
        return generation_response(start_completion(*model_of_body(r, req.body), req.body));
      },
      true);
  router.add(
      "POST", "/v1/chat/completions",
      [&r](const HttpRequest& req) {
        return generation_response(start_chat_completion(*model_of_body(r, req.body), req.body));
      },
      true);
  router.add(
      "GET", "/v1/models",
      [&r](const HttpRequest&) { return json_response(frontend::model_list(r.frontends())); },
      true);
  // GET /v1/models/{id}: a model served under that name or alias; any other is 404.
  router.add_prefix(
      "GET", "/v1/models/",
      [&r](const HttpRequest& req) {
        const std::string id = req.path.substr(std::string_view("/v1/models/").size());
        if (id.empty()) return error_response(404, "route " + req.path + " not found");
        return json_response(frontend::model_card(*r.resolve(id), id));
      },
      true, false);

  // Text Generation Inference: the bare routes serve the one model loaded; /models/{m}/...
  // serve model m (huggingface_hub's InferenceClient given the URL .../models/{m}).
  using frontend::TgiRoute;
  for (const auto& entry : {std::pair{"/generate", TgiRoute::kGenerate},
                            std::pair{"/generate_stream", TgiRoute::kGenerateStream},
                            std::pair{"/", TgiRoute::kCompat}}) {
    const TgiRoute route = entry.second;
    router.add(
        "POST", entry.first,
        [&r, route](const HttpRequest& req) {
          return generation_response(start_tgi_generation(*r.resolve(""), req.body, route));
        },
        true);
  }
  router.add(
      "GET", "/info",
      [&r](const HttpRequest&) { return json_response(frontend::tgi_info(*r.resolve(""))); },
      false);
  router.add_prefix(
      "POST", "/models/",
      [&r](const HttpRequest& req) {
        const auto [model, action] = model_path(req.path);
        const TgiRoute route = action == "generate"          ? TgiRoute::kGenerate
                               : action == "generate_stream" ? TgiRoute::kGenerateStream
                                                             : TgiRoute::kCompat;
        if (!action.empty() && route == TgiRoute::kCompat) {
          return error_response(404, "route " + req.path + " not found");
        }
        return generation_response(start_tgi_generation(*r.resolve(model), req.body, route));
      },
      true, false);
  router.add_prefix(
      "GET", "/models/",
      [&r](const HttpRequest& req) {
        const auto [model, action] = model_path(req.path);
        if (action != "info") return error_response(404, "route " + req.path + " not found");
        return json_response(frontend::tgi_info(*r.resolve(model)));
      },
      false, false);

  // vLLM's tokenizer endpoints.
  router.add(
      "POST", "/tokenize",
      [&r](const HttpRequest& req) {
        return json_response(frontend::tokenize_request(*model_of_body(r, req.body), req.body));
      },
      true);
  router.add(
      "POST", "/detokenize",
      [&r](const HttpRequest& req) {
        return json_response(frontend::detokenize_request(*model_of_body(r, req.body), req.body));
      },
      true);

  add_kserve_routes(router, registry);
  add_kserve_repository_routes(router, registry, explicit_model_control);

  // Probes and scrapers.
  router.add(
      "GET", "/health", [&r](const HttpRequest&) { return health(r); }, false);
  router.add(
      "GET", "/metrics",
      [&r, prefix = std::move(metrics_prefix), http_stats](const HttpRequest&) {
        return metrics(r, prefix, http_stats);
      },
      false);
  router.add(
      "GET", "/version", [](const HttpRequest&) { return version(); }, false);

  // The playground and the API description: static, no key (the playground asks for one and
  // sends it with its API calls).
  router.add(
      "GET", "/", [](const HttpRequest&) { return html_page(assets::playground_html()); }, false);
  router.add(
      "GET", "/docs", [](const HttpRequest&) { return html_page(assets::docs_html()); }, false);
  router.add(
      "GET", "/openapi.json", [](const HttpRequest&) { return openapi_document(); }, false);
}

}  // namespace inflight::server
