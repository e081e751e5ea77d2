// The KServe v2 protocol over a Frontend, whatever the transport (HTTP JSON in src/server,
// gRPC in src/server/grpc): the served model under its served name, version "1", with the
// TensorRT-LLM ensemble's tensors (kserve_protocol.h).
//
//   server metadata    {"name": "inflight", "version", "extensions": [...]}
//   model metadata     {"name", "versions": ["1"], "platform": "ensemble", "inputs", "outputs"}
//   infer              one response: text_output (the prompt first unless
//                      exclude_input_in_output), or stream=true: decoupled, one response per
//                      chunk of new text, the last one final
//   generate[_stream]  Triton's generate extension: {"model_name", "model_version",
//                      "text_output"} (one JSON body, or one SSE event per chunk)
//
// Unknown model or version: ApiError(404); while loading: 503.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "frontend/frontend.h"
#include "frontend/generation.h"
#include "frontend/kserve_protocol.h"
#include "frontend/model_registry.h"

namespace inflight::frontend {

inline constexpr std::string_view kKServeModelVersion = "1";

nlohmann::ordered_json kserve_server_metadata();
nlohmann::ordered_json kserve_model_metadata(const Frontend& frontend);

// Triton's model configuration of a loaded model, in the protobuf JSON form of its ModelConfig
// (what GET /v2/models/{m}/config answers and the gRPC ModelConfig carries): the tensors as
// TYPE_* inputs and outputs without the batch dimension, max_batch_size = the engine's
// max_num_seqs, decoupled (streaming) transactions, and the engine's settings as parameters.
nlohmann::ordered_json kserve_model_config(const Frontend& frontend);
// Triton's ModelStatistics of a model, in protobuf JSON form, from its engine's figures:
// success = requests finished by stop or length (ns: their end-to-end time), fail = failed or
// aborted, queue = arrival to first scheduled, compute_infer = the end-to-end time less the
// queue time, execution_count = engine steps; last_inference in ms since the epoch.
nlohmann::ordered_json kserve_model_statistics(const Frontend& frontend);

// ApiError(404) unless `model` is the served name and `version` is empty or "1".
void check_kserve_model(const Frontend& frontend, std::string_view model, std::string_view version);
// The model a KServe request names (path or model_name): ApiError(404) for an unknown model or
// version, or a model not loaded.
std::shared_ptr<Frontend> resolve_kserve_model(const ModelRegistry& registry,
                                               std::string_view model, std::string_view version);

// An accepted inference request: its engine request runs.
struct KServeGeneration {
  std::shared_ptr<Generation> generation;
  std::string id;
  TrtLlmRequest request;
};

// Validates the inputs (ApiError 400), builds the engine request and submits it.
// `streams`: the transport can send decoupled responses; else stream=true is ApiError(400).
KServeGeneration start_kserve_generation(Frontend& frontend, const KServeInferRequest& request,
                                         bool streams);

// What a KServe response carries, accumulated from a generation's outputs.
struct KServeText {
  std::string text;                  // text_output
  std::vector<float> log_probs;      // with return_log_probs: one per token
  std::optional<std::string> error;  // the request failed inside the engine
};
// Appends `outputs` to `text` (an engine failure sets `error`).
void add_kserve_outputs(KServeText& text, const std::vector<TaggedOutput>& outputs);

// The body of a KServe v2 HTTP infer response.
nlohmann::ordered_json kserve_infer_response(const Frontend& frontend,
                                             const KServeGeneration& generation,
                                             const KServeText& text);

// HTTP routes: POST /v2/models/{model}[/versions/{v}]/infer (`json_length`: the binary tensor
// extension, kserve_protocol.h), and /generate, /generate_stream. `render` of an infer gives
// the JSON response with every output's data inline; the transport moves those in `binary`
// out (move_outputs_to_binary).
struct KServeHttpInfer {
  StartedGeneration started;
  KServeBinaryOutputs binary;
};
KServeHttpInfer start_kserve_http_infer(Frontend& frontend, std::string_view body,
                                        std::optional<size_t> json_length);
StartedGeneration start_kserve_generate(Frontend& frontend, std::string_view body, bool stream);

}  // namespace inflight::frontend
