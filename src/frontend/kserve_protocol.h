// The KServe v2 inference protocol (Triton's), transport-free: tensors as the HTTP JSON body and
// the gRPC messages both carry them, and the inputs and outputs of Triton's TensorRT-LLM
// ensemble model, which `inflight serve` presents as its served model.
//
//   inputs   text_input BYTES [1] or [1,1] (required), max_tokens INT32 (required), bad_words
//            and stop_words BYTES [n] or [1,n], stream BOOL, exclude_input_in_output BOOL,
//            temperature FP32, top_k INT32, top_p FP32, random_seed UINT64, beam_width INT32
//            (only 1), min_length INT32, end_id INT32, pad_id INT32, repetition_penalty,
//            presence_penalty, frequency_penalty, length_penalty FP32, return_log_probs BOOL,
//            and inflight's own ignore_eos BOOL
//   outputs  text_output BYTES (same rank as text_input); with return_log_probs,
//            cum_log_probs FP32 [1] and output_log_probs FP32 [1, tokens]
//
// A scalar input holds one element, with shape [1] or [1, 1] (batch 1: the ensemble's leading
// dimension). Datatypes must match exactly, as Triton requires; anything else is ApiError(400)
// naming the input. Sampling is greedy unless temperature, top_k or top_p is given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/openai_protocol.h"

namespace inflight::frontend {

// One input tensor. Its elements, flattened row-major, sit in the vector of its datatype.
struct KServeTensor {
  std::string name;
  std::string datatype;  // "BYTES", "BOOL", "INT8".."INT64", "UINT8".."UINT64", "FP32", "FP64"
  std::vector<int64_t> shape;
  std::vector<std::string> bytes;  // BYTES
  std::vector<double> reals;       // FP32, FP64
  std::vector<int64_t> integers;   // BOOL (0/1), INT*, UINT* (UINT64 as its bit pattern)

  size_t element_count() const;
};

// Which outputs an HTTP client wants as binary data (Triton's binary tensor extension): all
// (request parameter binary_data_output, which tritonclient sets when it names no outputs) or
// those requested with the parameter binary_data.
struct KServeBinaryOutputs {
  bool all = false;
  std::vector<std::string> names;
  bool any() const { return all || !names.empty(); }
};

// One inference request as either transport delivers it.
struct KServeInferRequest {
  std::string id;  // echoed in the response
  std::vector<KServeTensor> inputs;
  KServeBinaryOutputs binary_outputs;  // HTTP only
};

// ApiError(400) unless the tensor holds as many elements as its shape describes.
void check_element_count(const KServeTensor& tensor);

// Fills `tensor`'s elements from raw little-endian bytes (gRPC raw_input_contents, HTTP binary
// data): fixed-size elements back to back, a BYTES element as a 4-byte little-endian length and
// its bytes. ApiError(400) when the size disagrees with the shape or the datatype is unknown.
void decode_raw_tensor(KServeTensor& tensor, std::string_view raw);

// POST /v2/models/{m}/infer: the JSON body, or with Triton's binary tensor extension the first
// `json_length` bytes of it (header Inference-Header-Content-Length) followed by the binary data
// of the inputs whose parameters hold "binary_data_size", in input order.
KServeInferRequest parse_kserve_http_infer(std::string_view body,
                                           std::optional<size_t> json_length);

// Moves the data of the binary outputs of an HTTP infer response (its JSON body) into the
// returned blob, in output order: a BYTES element as a 4-byte little-endian length and its
// bytes, FP32 elements as 4 little-endian bytes. Each such output gets the parameter
// binary_data_size instead of "data".
std::string move_outputs_to_binary(nlohmann::ordered_json& response,
                                   const KServeBinaryOutputs& binary);

// POST /v2/models/{m}/generate[_stream]: {"text_input": "...", "max_tokens": 20, ...}, each
// input a JSON value (a string, number, bool, or a list of strings for bad/stop words) at the
// top level or in "parameters"; their datatypes are the ensemble's.
KServeInferRequest parse_kserve_generate(std::string_view body);

// The validated inputs of the TensorRT-LLM ensemble.
struct TrtLlmRequest {
  std::string text_input;
  SamplingParams sampling;
  std::vector<std::string> bad_words;  // each banned (frontend/kserve_api.cc)
  bool stream = false;
  bool exclude_input_in_output = false;
  bool return_log_probs = false;
  size_t text_rank = 2;  // of text_input's shape, mirrored by text_output
};

TrtLlmRequest parse_trtllm_request(const KServeInferRequest& request, const ProtocolLimits& limits);

// An input or output of the served model, for the metadata endpoints.
struct TensorSpec {
  std::string_view name;
  std::string_view datatype;
  std::vector<int64_t> shape;  // with the batch dimension; -1 = any size
  bool optional = true;
};
const std::vector<TensorSpec>& trtllm_inputs();
const std::vector<TensorSpec>& trtllm_outputs();

}  // namespace inflight::frontend
