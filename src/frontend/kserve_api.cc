#include "frontend/kserve_api.h"

#include <fmt/format.h>

#include <algorithm>

#include "frontend/error_mapping.h"
#include "frontend/openai_responses.h"
#include "frontend/prompt_builder.h"

namespace inflight::frontend {

using json = nlohmann::ordered_json;

namespace {

json tensor_specs(const std::vector<TensorSpec>& specs) {
  json out = json::array();
  for (const TensorSpec& s : specs) {
    out.push_back({{"name", s.name}, {"datatype", s.datatype}, {"shape", s.shape}});
  }
  return out;
}

// Bans each bad word: a word must be one token (TensorRT-LLM bans token sequences; the engine
// bans single tokens through logit_bias).
void ban_words(const LoadedModel& model, TrtLlmRequest& req) {
  for (const std::string& word : req.bad_words) {
    const std::vector<int32_t> ids = tokenize(model, word, false);
    if (ids.size() != 1) {
      throw_bad_request(fmt::format("bad_words: '{}' is {} tokens; only single-token words are "
                                    "supported",
                                    word, ids.size()),
                        "bad_words");
    }
    req.sampling.logit_bias.emplace_back(ids[0], -100.0f);
  }
}

json text_tensor(const TrtLlmRequest& req, std::string text) {
  std::vector<int64_t> shape(req.text_rank, 1);
  return {{"name", "text_output"},
          {"datatype", "BYTES"},
          {"shape", shape},
          {"data", json::array({std::move(text)})}};
}

json response_head(const Frontend& frontend, const std::string& id) {
  json body = {{"model_name", frontend.options().served_model_name},
               {"model_version", kKServeModelVersion}};
  if (!id.empty()) body["id"] = id;
  return body;
}

// generate_stream: one SSE event per chunk of new text.
class GenerateStream final : public StreamFormatter {
 public:
  explicit GenerateStream(std::string model_name) : model_name_(std::move(model_name)) {}

  void on_output(const TaggedOutput& tagged, std::vector<std::string>& events) override {
    const RequestOutput& o = tagged.output;
    if (o.finish_reason == FinishReason::kError) {
      events.push_back(dump_json({{"error", engine_failure_error(o.error).what()}}));
      return;
    }
    if (o.text.empty() && !o.finish_reason) return;
    events.push_back(dump_json({{"model_name", model_name_},
                                {"model_version", kKServeModelVersion},
                                {"text_output", o.text}}));
  }
  void on_end(std::vector<std::string>&) override {}

 private:
  std::string model_name_;
};

}  // namespace

json kserve_server_metadata() {
  return {{"name", "inflight"},
          {"version", "0.1.0"},
          {"extensions",
           json::array({"generate", "model_repository", "model_configuration", "statistics"})}};
}

json kserve_model_metadata(const Frontend& frontend) {
  return {{"name", frontend.options().served_model_name},
          {"versions", json::array({kKServeModelVersion})},
          {"platform", "ensemble"},
          {"inputs", tensor_specs(trtllm_inputs())},
          {"outputs", tensor_specs(trtllm_outputs())}};
}

namespace {

// [{"name", "data_type": "TYPE_...", "dims"[, "optional"]}] without the batch dimension.
json config_tensors(const std::vector<TensorSpec>& specs, bool inputs) {
  json out = json::array();
  for (const TensorSpec& s : specs) {
    const std::string type = s.datatype == "BYTES" ? "STRING" : std::string(s.datatype);
    json t = {{"name", s.name},
              {"data_type", "TYPE_" + type},
              {"dims", std::vector<int64_t>(s.shape.begin() + 1, s.shape.end())}};
    if (inputs) t["optional"] = s.optional;
    out.push_back(std::move(t));
  }
  return out;
}

json duration(uint64_t count, double seconds) {
  return {{"count", count}, {"ns", static_cast<uint64_t>(std::max(0.0, seconds) * 1e9)}};
}

}  // namespace

json kserve_model_config(const Frontend& frontend) {
  const LoadedModel& model = frontend.model();
  const EngineConfig& c = model.engine->config();
  json parameters = json::object();
  auto param = [&parameters](const char* key, const std::string& value) {
    parameters[key] = {{"string_value", value}};
  };
  param("device", model.engine->device_name());
  param("max_model_len", std::to_string(c.max_model_len));
  param("max_num_batched_tokens", std::to_string(c.max_num_batched_tokens));
  param("num_kv_blocks", std::to_string(c.num_kv_blocks));
  param("block_size", std::to_string(c.block_size));
  param("enable_prefix_caching", c.enable_prefix_caching ? "true" : "false");
  return {{"name", frontend.options().served_model_name},
          {"platform", "ensemble"},
          {"backend", "inflight"},
          {"max_batch_size", c.max_num_seqs},
          {"input", config_tensors(trtllm_inputs(), true)},
          {"output", config_tensors(trtllm_outputs(), false)},
          {"model_transaction_policy", {{"decoupled", true}}},
          {"parameters", std::move(parameters)}};
}

json kserve_model_statistics(const Frontend& frontend) {
  const EngineStats s = frontend.model().engine->stats();
  const uint64_t success = s.num_requests_stopped + s.num_requests_length;
  const uint64_t fail = s.num_requests_failed + s.num_requests_aborted;
  const double e2e_s = s.e2e_latency.sum;
  const json none = duration(0, 0);
  return {{"name", frontend.options().served_model_name},
          {"version", kKServeModelVersion},
          {"last_inference", frontend.last_request_ms()},
          {"inference_count", success + fail},
          {"execution_count", s.step_time.count},
          {"inference_stats",
           {{"success", duration(success, e2e_s)},
            {"fail", duration(fail, 0)},
            {"queue", duration(s.queue_time.count, s.queue_time.sum)},
            {"compute_input", none},
            {"compute_infer", duration(s.e2e_latency.count, e2e_s - s.queue_time.sum)},
            {"compute_output", none},
            {"cache_hit", none},
            {"cache_miss", none}}},
          {"batch_stats", json::array()}};
}

void check_kserve_model(const Frontend& frontend, std::string_view model,
                        std::string_view version) {
  if (!frontend.serves(model)) {
    throw_not_found(fmt::format("unknown model: '{}'", model), "model");
  }
  if (!version.empty() && version != kKServeModelVersion) {
    throw_not_found(fmt::format("unknown version '{}' of model '{}'", version, model), "version");
  }
}

std::shared_ptr<Frontend> resolve_kserve_model(const ModelRegistry& registry,
                                               std::string_view model, std::string_view version) {
  if (!registry.knows(model)) throw_not_found(fmt::format("unknown model: '{}'", model), "model");
  std::shared_ptr<Frontend> fe = registry.resolve(model);  // 404 while not loaded
  check_kserve_model(*fe, model, version);
  return fe;
}

KServeGeneration start_kserve_generation(Frontend& frontend, const KServeInferRequest& request,
                                         bool streams) {
  const LoadedModel& model = frontend.model();
  KServeGeneration g;
  g.id = request.id;
  g.request = parse_trtllm_request(request, model.limits);
  if (g.request.stream && !streams) {
    throw_bad_request(
        "'stream' is true: stream with ModelStreamInfer (gRPC) or "
        "/generate_stream",
        "stream");
  }
  ban_words(model, g.request);
  std::vector<Request> requests;
  requests.push_back(
      build_engine_request(model, PromptInput{g.request.text_input, {}}, true, g.request.sampling));
  g.generation = Generation::submit(frontend, std::move(requests));
  return g;
}

void add_kserve_outputs(KServeText& text, const std::vector<TaggedOutput>& outputs) {
  for (const TaggedOutput& tagged : outputs) {
    const RequestOutput& o = tagged.output;
    if (o.finish_reason == FinishReason::kError) {
      text.error = engine_failure_error(o.error).what();
      continue;
    }
    text.text += o.text;
    for (const TokenLogprob& lp : o.logprobs) text.log_probs.push_back(lp.logprob);
  }
}

json kserve_infer_response(const Frontend& frontend, const KServeGeneration& generation,
                           const KServeText& text) {
  const TrtLlmRequest& req = generation.request;
  json body = response_head(frontend, generation.id);
  json outputs = json::array();
  outputs.push_back(
      text_tensor(req, req.exclude_input_in_output ? text.text : req.text_input + text.text));
  if (req.return_log_probs) {
    double cum = 0;
    for (float lp : text.log_probs) cum += lp;
    outputs.push_back({{"name", "cum_log_probs"},
                       {"datatype", "FP32"},
                       {"shape", {1, 1}},
                       {"data", json::array({cum})}});
    outputs.push_back({{"name", "output_log_probs"},
                       {"datatype", "FP32"},
                       {"shape", {1, static_cast<int64_t>(text.log_probs.size())}},
                       {"data", text.log_probs}});
  }
  body["outputs"] = std::move(outputs);
  return body;
}

KServeHttpInfer start_kserve_http_infer(Frontend& frontend, std::string_view body,
                                        std::optional<size_t> json_length) {
  frontend.model();  // 503 while loading, before parsing
  const KServeInferRequest request = parse_kserve_http_infer(body, json_length);
  KServeGeneration g = start_kserve_generation(frontend, request, false);
  StartedGeneration started;
  started.generation = std::move(g.generation);
  started.render = [&frontend, g = std::move(g)](GenerationResult& result) {
    const ChoiceResult& c = result.choices.at(0);
    KServeText text{c.text, {}, std::nullopt};
    for (const TokenLogprob& lp : c.logprobs) text.log_probs.push_back(lp.logprob);
    return kserve_infer_response(frontend, g, text);
  };
  return {std::move(started), request.binary_outputs};
}

StartedGeneration start_kserve_generate(Frontend& frontend, std::string_view body, bool stream) {
  frontend.model();
  const KServeInferRequest request = parse_kserve_generate(body);
  // The route, not the body's `stream`, decides between one body and SSE.
  KServeGeneration g = start_kserve_generation(frontend, request, true);
  StartedGeneration started;
  started.generation = std::move(g.generation);
  started.stream = stream;
  if (stream) {
    started.formatter = std::make_unique<GenerateStream>(frontend.options().served_model_name);
  } else {
    started.render = [&frontend, g = std::move(g)](GenerationResult& result) {
      const TrtLlmRequest& req = g.request;
      const std::string& out = result.choices.at(0).text;
      json response = response_head(frontend, g.id);
      response["text_output"] = req.exclude_input_in_output ? out : req.text_input + out;
      return response;
    };
  }
  return started;
}

}  // namespace inflight::frontend
