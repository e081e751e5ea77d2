#include "server/grpc/kserve_messages.h"

#include <cstring>

#include "frontend/error_mapping.h"

namespace inflight::server {

namespace {

using Tensor = inference::ModelInferRequest::InferInputTensor;

// The typed contents of a tensor, by its datatype.
void read_contents(const Tensor& in, frontend::KServeTensor& t) {
  const inference::InferTensorContents& c = in.contents();
  const std::string& dt = t.datatype;
  if (dt == "BYTES") {
    t.bytes.assign(c.bytes_contents().begin(), c.bytes_contents().end());
  } else if (dt == "BOOL") {
    t.integers.assign(c.bool_contents().begin(), c.bool_contents().end());
  } else if (dt == "INT8" || dt == "INT16" || dt == "INT32") {
    t.integers.assign(c.int_contents().begin(), c.int_contents().end());
  } else if (dt == "INT64") {
    t.integers.assign(c.int64_contents().begin(), c.int64_contents().end());
  } else if (dt == "UINT8" || dt == "UINT16" || dt == "UINT32") {
    t.integers.assign(c.uint_contents().begin(), c.uint_contents().end());
  } else if (dt == "UINT64") {
    for (uint64_t v : c.uint64_contents()) t.integers.push_back(static_cast<int64_t>(v));
  } else if (dt == "FP32") {
    t.reals.assign(c.fp32_contents().begin(), c.fp32_contents().end());
  } else if (dt == "FP64") {
    t.reals.assign(c.fp64_contents().begin(), c.fp64_contents().end());
  } else {
    frontend::throw_bad_request("input '" + t.name + "': unsupported datatype '" + dt + "'",
                                t.name);
  }
  frontend::check_element_count(t);
}

// A BYTES tensor of one element, raw: its 4-byte little-endian length, then the bytes.
std::string raw_bytes_element(const std::string& s) {
  std::string raw(4 + s.size(), '\0');
  const uint32_t n = static_cast<uint32_t>(s.size());
  std::memcpy(raw.data(), &n, 4);
  std::memcpy(raw.data() + 4, s.data(), s.size());
  return raw;
}

}  // namespace

frontend::KServeInferRequest to_kserve_request(const inference::ModelInferRequest& request) {
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    frontend::throw_bad_request("raw_input_contents must hold one entry per input");
  }
  frontend::KServeInferRequest out;
  out.id = request.id();
  for (int i = 0; i < request.inputs_size(); ++i) {
    const Tensor& in = request.inputs(i);
    frontend::KServeTensor t;
    t.name = in.name();
    t.datatype = in.datatype();
    t.shape.assign(in.shape().begin(), in.shape().end());
    if (raw) {
      frontend::decode_raw_tensor(t, request.raw_input_contents(i));
    } else {
      read_contents(in, t);
    }
    out.inputs.push_back(std::move(t));
  }
  return out;
}

void fill_infer_response(inference::ModelInferResponse& response, const std::string& model_name,
                         const frontend::KServeGeneration& generation, const std::string& text,
                         const std::vector<float>& log_probs, bool final) {
  response.set_model_name(model_name);
  response.set_model_version(std::string(frontend::kKServeModelVersion));
  response.set_id(generation.id);
  auto* out = response.add_outputs();
  out->set_name("text_output");
  out->set_datatype("BYTES");
  for (size_t i = 0; i < generation.request.text_rank; ++i) out->add_shape(1);
  response.add_raw_output_contents(raw_bytes_element(text));
  if (generation.request.return_log_probs && final && !generation.request.stream) {
    double cum = 0;
    for (float lp : log_probs) cum += lp;
    auto* c = response.add_outputs();
    c->set_name("cum_log_probs");
    c->set_datatype("FP32");
    c->add_shape(1);
    c->add_shape(1);
    const float cum32 = static_cast<float>(cum);
    response.add_raw_output_contents(std::string(reinterpret_cast<const char*>(&cum32), 4));
    auto* o = response.add_outputs();
    o->set_name("output_log_probs");
    o->set_datatype("FP32");
    o->add_shape(1);
    o->add_shape(static_cast<int64_t>(log_probs.size()));
    response.add_raw_output_contents(
        std::string(reinterpret_cast<const char*>(log_probs.data()), log_probs.size() * 4));
  }
  (*response.mutable_parameters())["triton_final_response"].set_bool_param(final);
}

grpc::Status to_grpc_status(const frontend::ApiError& error) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (error.status()) {
    case 400:
    case 413:
    case 415:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case 401:
      code = grpc::StatusCode::UNAUTHENTICATED;
      break;
    case 404:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case 429:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    case 503:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    default:
      break;
  }
  return {code, error.what()};
}

grpc::Status current_grpc_status(std::string_view context) {
  return to_grpc_status(frontend::current_api_error(context));
}

}  // namespace inflight::server
