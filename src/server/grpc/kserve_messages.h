// Between the KServe v2 protobuf messages and the transport-free front end
// (frontend/kserve_api.h): requests in, responses and statuses out.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "frontend/api_error.h"
#include "frontend/kserve_api.h"
#include "grpc_service.pb.h"

namespace inflight::server {

// The inputs of a request, from `contents` by datatype or from raw_input_contents (one entry
// per input). ApiError(400) when they disagree with the shapes.
frontend::KServeInferRequest to_kserve_request(const inference::ModelInferRequest& request);

// A response of `generation` holding `text` as text_output (raw BYTES), with log probs when it
// asked for them and the decoupled final flag.
void fill_infer_response(inference::ModelInferResponse& response, const std::string& model_name,
                         const frontend::KServeGeneration& generation, const std::string& text,
                         const std::vector<float>& log_probs, bool final);

grpc::Status to_grpc_status(const frontend::ApiError& error);

// The status of the exception being handled (frontend::current_api_error); call only inside a
// catch block.
grpc::Status current_grpc_status(std::string_view context);

}  // namespace inflight::server
