#include "frontend/tgi_api.h"

#include <random>

#include "frontend/json_fields.h"
#include "frontend/prompt_builder.h"
#include "frontend/structured_output_fields.h"
#include "frontend/tgi_protocol.h"

namespace inflight::frontend {

using json = nlohmann::ordered_json;

StartedGeneration start_tgi_generation(Frontend& frontend, std::string_view body, bool stream) {
  const LoadedModel& model = frontend.model();
  TgiFormat format;
  format.request = parse_tgi_request(parse_json_object(body), model.limits);
  if (format.request.constraint) {
    check_structured_output(*model.engine, *format.request.constraint);
  }
  SamplingParams& s = format.request.sampling;
  if (s.temperature > 0 && !s.seed) {
    // TGI reports the seed it sampled with, so draw it here rather than in the engine.
    thread_local std::mt19937_64 rng{std::random_device{}()};
    s.seed = rng() >> 1;
  }
  Request r = build_engine_request(model, PromptInput{format.request.inputs, {}}, true, s);
  format.input_length = r.prompt_token_ids.size();
  format.tokenizer = model.tokenizer.get();

  std::vector<Request> requests;
  requests.push_back(std::move(r));
  StartedGeneration started;
  started.generation = Generation::submit(frontend, std::move(requests));
  started.stream = stream;
  if (stream) {
    started.formatter = tgi_stream_formatter(format);
  } else {
    started.render = [format](GenerationResult& result) { return tgi_response(format, result); };
  }
  return started;
}

json tgi_info(const Frontend& frontend) {
  const LoadedModel& model = frontend.model();
  return {{"model_id", frontend.options().served_model_name},
          {"max_concurrent_requests", frontend.options().max_concurrent_requests},
          {"max_best_of", 1},
          {"max_stop_sequences", model.limits.max_stop},
          {"max_input_tokens", model.max_model_len - 1},
          {"max_total_tokens", model.max_model_len},
          {"version", "0.1.0"},
          {"router", "inflight"}};
}

}  // namespace inflight::frontend
