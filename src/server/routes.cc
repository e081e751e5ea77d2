#include "server/routes.h"

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

// 200 with an empty body once the model is loaded (as vLLM), 503 before.
HttpResponse health(const frontend::Frontend& fe) {
  if (!fe.ready()) return error_response(503, "the model is still loading");
  HttpResponse res;
  res.content_type = "text/plain";
  return res;
}

HttpResponse metrics(const frontend::Frontend& fe, const std::string& prefix,
                     const std::function<HttpServerStats()>& http_stats) {
  auto model = fe.model_or_null();
  std::optional<EngineStats> stats;
  if (model) stats = model->engine->stats();
  HttpResponse res;
  res.content_type = std::string(kMetricsContentType);
  res.body = render_metrics(stats ? &*stats : nullptr, http_stats(), fe, prefix);
  return res;
}

HttpResponse version() {
  HttpResponse res;
  res.body = R"({"version":"0.1.0"})";
  return res;
}

}  // namespace

void add_routes(Router& router, frontend::Frontend& fe, std::string metrics_prefix,
                std::function<HttpServerStats()> http_stats) {
  using frontend::start_chat_completion, frontend::start_completion,
      frontend::start_tgi_generation;
  // OpenAI. GET /v1/models/{id}: only the served model exists; any other id is an unknown
  // route (404).
  router.add("POST", "/v1/completions",
             [&fe](const HttpRequest& r) {
               return generation_response(start_completion(fe, r.body));
             },
             true);
  router.add("POST", "/v1/chat/completions",
             [&fe](const HttpRequest& r) {
               return generation_response(start_chat_completion(fe, r.body));
             },
             true);
  router.add("GET", "/v1/models",
             [&fe](const HttpRequest&) { return json_response(frontend::model_list(fe)); }, true);
  router.add("GET", "/v1/models/" + fe.options().served_model_name,
             [&fe](const HttpRequest&) { return json_response(frontend::model_card(fe)); }, true);

  // Text Generation Inference.
  using frontend::TgiRoute;
  for (const auto& entry : {std::pair{"/generate", TgiRoute::kGenerate},
                            std::pair{"/generate_stream", TgiRoute::kGenerateStream},
                            std::pair{"/", TgiRoute::kCompat}}) {
    const TgiRoute route = entry.second;
    router.add("POST", entry.first,
               [&fe, route](const HttpRequest& r) {
                 return generation_response(start_tgi_generation(fe, r.body, route));
               },
               true);
  }
  router.add("GET", "/info",
             [&fe](const HttpRequest&) { return json_response(frontend::tgi_info(fe)); }, false);

  // vLLM's tokenizer endpoints.
  router.add("POST", "/tokenize",
             [&fe](const HttpRequest& r) {
               return json_response(frontend::tokenize_request(fe, r.body));
             },
             true);
  router.add("POST", "/detokenize",
             [&fe](const HttpRequest& r) {
               return json_response(frontend::detokenize_request(fe, r.body));
             },
             true);

  add_kserve_routes(router, fe);

  // Probes and scrapers.
  router.add("GET", "/health", [&fe](const HttpRequest&) { return health(fe); }, false);
  router.add("GET", "/metrics",
             [&fe, prefix = std::move(metrics_prefix), http_stats](const HttpRequest&) {
               return metrics(fe, prefix, http_stats);
             },
             false);
  router.add("GET", "/version", [](const HttpRequest&) { return version(); }, false);

  // The playground and the API description: static, no key (the playground asks for one and
  // sends it with its API calls).
  router.add("GET", "/", [](const HttpRequest&) { return html_page(assets::playground_html()); },
             false);
  router.add("GET", "/docs", [](const HttpRequest&) { return html_page(assets::docs_html()); },
             false);
  router.add("GET", "/openapi.json", [](const HttpRequest&) { return openapi_document(); },
             false);
}

}  // namespace inflight::server
