// POST /generate and POST /generate_stream (Text Generation Inference).
#include <random>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/prompt_builder.h"
#include "server/routes.h"
#include "server/tgi_protocol.h"

namespace inflight::server {

using json = nlohmann::ordered_json;

namespace {

HttpResponse generate(ServerContext& ctx, const HttpRequest& http, bool stream) {
  const LoadedModel& model = ctx.model();
  json body = parse_json_object(http.body);
  TgiFormat format;
  format.request = parse_tgi_request(body, model.limits);
  SamplingParams& s = format.request.sampling;
  if (s.temperature > 0 && !s.seed) {
    // TGI reports the seed it sampled with, so draw it here rather than in the engine.
    thread_local std::mt19937_64 rng{std::random_device{}()};
    s.seed = rng() >> 1;
  }
  Request r;
  r.sampling = s;
  r.prompt_token_ids = tokenize(model, format.request.inputs, true);
  check_context_length(model, r.prompt_token_ids.size(), s.max_tokens);
  format.input_length = r.prompt_token_ids.size();
  format.tokenizer = model.tokenizer.get();

  std::vector<Request> requests;
  requests.push_back(std::move(r));
  auto generation = Generation::submit(ctx, std::move(requests));
  if (stream) {
    return sse_response(
        std::make_shared<GenerationStream>(std::move(generation), tgi_stream_formatter(format)));
  }
  HttpResponse res;
  res.deferred = std::make_shared<GenerationCollector>(
      std::move(generation), 1,
      [format](GenerationResult& result) { return tgi_response(format, result); });
  return res;
}

}  // namespace

void add_tgi_routes(Router& router, ServerContext& ctx) {
  router.add("POST", "/generate",
             [&ctx](const HttpRequest& r) { return generate(ctx, r, false); }, true);
  router.add("POST", "/generate_stream",
             [&ctx](const HttpRequest& r) { return generate(ctx, r, true); }, true);
}

}  // namespace inflight::server
