// GET /health, GET /metrics, GET /version, GET /info.
#include "server/api_error.h"
#include "server/metrics.h"
#include "server/openai_responses.h"
#include "server/routes.h"

namespace inflight::server {

using json = nlohmann::ordered_json;

namespace {

// 200 with an empty body once the model is loaded (as vLLM), 503 before.
HttpResponse health(ServerContext& ctx) {
  if (!ctx.ready()) return error_response(503, "the model is still loading");
  HttpResponse res;
  res.content_type = "text/plain";
  return res;
}

HttpResponse metrics(ServerContext& ctx, const std::function<HttpServerStats()>& http_stats) {
  auto model = ctx.model_or_null();
  std::optional<EngineStats> stats;
  if (model) stats = model->engine->stats();
  HttpResponse res;
  res.content_type = std::string(kMetricsContentType);
  res.body = render_metrics(stats ? &*stats : nullptr, http_stats(), ctx);
  return res;
}

// TGI's /info, the fields its clients read.
HttpResponse info(ServerContext& ctx) {
  const LoadedModel& model = ctx.model();
  json body = {{"model_id", ctx.options().served_model_name},
               {"max_concurrent_requests", ctx.options().max_concurrent_requests},
               {"max_best_of", 1},
               {"max_stop_sequences", model.limits.max_stop},
               {"max_input_tokens", model.max_model_len - 1},
               {"max_total_tokens", model.max_model_len},
               {"version", "0.1.0"},
               {"router", "inflight"}};
  HttpResponse res;
  res.body = dump_json(body);
  return res;
}

}  // namespace

void add_info_routes(Router& router, ServerContext& ctx,
                     std::function<HttpServerStats()> http_stats) {
  router.add("GET", "/health", [&ctx](const HttpRequest&) { return health(ctx); }, false);
  router.add(
      "GET", "/metrics",
      [&ctx, http_stats](const HttpRequest&) { return metrics(ctx, http_stats); }, false);
  router.add(
      "GET", "/version",
      [](const HttpRequest&) {
        HttpResponse res;
        res.body = R"({"version":"0.1.0"})";
        return res;
      },
      false);
  router.add("GET", "/info", [&ctx](const HttpRequest&) { return info(ctx); }, false);
}

}  // namespace inflight::server
