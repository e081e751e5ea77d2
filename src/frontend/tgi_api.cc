#include "frontend/tgi_api.h"

#include <random>

#include "frontend/api_error.h"
#include "frontend/json_fields.h"
#include "frontend/prompt_builder.h"
#include "frontend/structured_output_fields.h"
#include "frontend/tgi_protocol.h"

namespace inflight::frontend {

using json = nlohmann::ordered_json;

StartedGeneration start_tgi_generation(Frontend& frontend, std::string_view body, TgiRoute route) {
  const LoadedModel& model = frontend.model();
  const json request = parse_json_object(body);
  bool stream = route == TgiRoute::kGenerateStream;
  if (route == TgiRoute::kCompat) stream = FieldReader(request).boolean("stream").value_or(false);
  TgiFormat format;
  format.request = parse_tgi_request(request, model.limits);
  if (format.request.constraint) {
    check_structured_output(*model.engine, *format.request.constraint);
  }
  SamplingParams& s = format.request.sampling;
  if (s.temperature > 0 && !s.seed) {
    // TGI reports the seed it sampled with, so draw it here rather than in the engine.
    thread_local std::mt19937_64 rng{std::random_device{}()};
    s.seed = rng() >> 1;
  }
  if (stream && format.request.best_of > 1) {
    throw_bad_request("'best_of' > 1 is not supported when streaming tokens", "best_of");
  }
  PromptInput prompt{format.request.inputs, {}};
  if (const auto keep = format.request.truncate) {
    // TGI's truncate: the prompt's last `keep` tokens (as tokenized with special tokens).
    const std::vector<int32_t> ids = tokenize(model, prompt.text, true);
    if (ids.size() > static_cast<size_t>(*keep))
      prompt.token_ids.assign(ids.end() - *keep, ids.end());
  }
  Request r = build_engine_request(model, prompt, true, s);
  format.input_length = r.prompt_token_ids.size();
  format.prompt_tokens = r.prompt_token_ids;
  format.tokenizer = model.tokenizer.get();

  std::vector<Request> requests;
  requests.push_back(std::move(r));
  StartedGeneration started;
  started.generation = Generation::submit(frontend, std::move(requests));
  started.stream = stream;
  started.n = s.n;  // best_of
  if (stream) {
    started.formatter = tgi_stream_formatter(format);
  } else {
    started.render = [format, route](GenerationResult& result) {
      json response = tgi_response(format, result);
      return route == TgiRoute::kCompat ? json::array({std::move(response)}) : response;
    };
  }
  return started;
}

json tgi_info(const Frontend& frontend) {
  const LoadedModel& model = frontend.model();
  return {{"model_id", frontend.options().served_model_name},
          {"max_concurrent_requests", frontend.options().max_concurrent_requests},
          {"max_best_of", model.limits.max_n},
          {"max_stop_sequences", model.limits.max_stop},
          {"max_input_tokens", model.max_model_len - 1},
          {"max_total_tokens", model.max_model_len},
          {"version", "0.1.0"},
          {"router", "inflight"}};
}

}  // namespace inflight::frontend
