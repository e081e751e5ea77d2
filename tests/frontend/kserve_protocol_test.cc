#include "frontend/kserve_protocol.h"

#include <gtest/gtest.h>

#include <cstring>

#include "frontend/api_error.h"

namespace inflight::frontend {
namespace {

using json = nlohmann::ordered_json;

std::string raw_bytes(const std::vector<std::string>& elements) {
  std::string raw;
  for (const std::string& e : elements) {
    const uint32_t n = static_cast<uint32_t>(e.size());
    raw.append(reinterpret_cast<const char*>(&n), 4);
    raw += e;
  }
  return raw;
}

template <typename T>
std::string raw_of(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(T));
}

KServeTensor tensor(std::string name, std::string datatype, std::vector<int64_t> shape) {
  KServeTensor t;
  t.name = std::move(name);
  t.datatype = std::move(datatype);
  t.shape = std::move(shape);
  return t;
}

// text_input "Hello" and max_tokens 8, with shape [1, 1] each, plus `extra`.
KServeInferRequest prompt(std::vector<KServeTensor> extra = {}) {
  KServeInferRequest r;
  KServeTensor text = tensor("text_input", "BYTES", {1, 1});
  text.bytes = {"Hello"};
  KServeTensor max = tensor("max_tokens", "INT32", {1, 1});
  max.integers = {8};
  r.inputs = {text, max};
  for (auto& t : extra) r.inputs.push_back(std::move(t));
  return r;
}

std::string error_of(const KServeInferRequest& r) {
  try {
    parse_trtllm_request(r, ProtocolLimits{});
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.what();
  }
  return "";
}

TEST(KServeRawTensor, DecodesBytesAndScalars) {
  KServeTensor words = tensor("stop_words", "BYTES", {1, 2});
  decode_raw_tensor(words, raw_bytes({"a", "\n\n"}));
  EXPECT_EQ(words.bytes, (std::vector<std::string>{"a", "\n\n"}));
  KServeTensor max = tensor("max_tokens", "INT32", {1, 1});
  decode_raw_tensor(max, raw_of<int32_t>(-7));
  EXPECT_EQ(max.integers, std::vector<int64_t>{-7});
  KServeTensor seed = tensor("random_seed", "UINT64", {1});
  decode_raw_tensor(seed, raw_of<uint64_t>(~uint64_t{0}));
  EXPECT_EQ(static_cast<uint64_t>(seed.integers[0]), ~uint64_t{0});
  KServeTensor t = tensor("temperature", "FP32", {1});
  decode_raw_tensor(t, raw_of<float>(0.5f));
  EXPECT_EQ(t.reals, std::vector<double>{0.5});
}

TEST(KServeRawTensor, RejectsSizesThatDisagreeWithTheShape) {
  KServeTensor max = tensor("max_tokens", "INT32", {1, 1});
  EXPECT_THROW(decode_raw_tensor(max, std::string(2, '\0')), ApiError);
  KServeTensor words = tensor("bad_words", "BYTES", {2});
  EXPECT_THROW(decode_raw_tensor(words, raw_bytes({"x"})), ApiError);
  KServeTensor truncated = tensor("bad_words", "BYTES", {1});
  EXPECT_THROW(decode_raw_tensor(truncated, raw_bytes({"abc"}).substr(0, 5)), ApiError);
  KServeTensor negative = tensor("bad_words", "BYTES", {-1});
  EXPECT_THROW(decode_raw_tensor(negative, ""), ApiError);
  KServeTensor half = tensor("x", "FP16", {1});
  EXPECT_THROW(decode_raw_tensor(half, "ab"), ApiError);
}

TEST(KServeHttpInfer, JsonAndBinaryInputs) {
  const std::string head =
      R"({"id":"r1","inputs":[{"name":"text_input","shape":[1,1],"datatype":"BYTES",
      "data":[["Hi"]]},{"name":"max_tokens","shape":[1,1],"datatype":"INT32",
      "parameters":{"binary_data_size":4}}],"outputs":[{"name":"text_output",
      "parameters":{"binary_data":true}}]})";
  const std::string body = head + raw_of<int32_t>(5);
  KServeInferRequest r = parse_kserve_http_infer(body, head.size());
  EXPECT_EQ(r.id, "r1");
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[0].bytes, std::vector<std::string>{"Hi"});
  EXPECT_EQ(r.inputs[1].integers, std::vector<int64_t>{5});
  EXPECT_EQ(r.binary_outputs.names, std::vector<std::string>{"text_output"});
  EXPECT_FALSE(r.binary_outputs.all);
}

TEST(KServeHttpInfer, RejectsMalformedBodies) {
  auto status = [](const std::string& body, std::optional<size_t> length = std::nullopt) {
    try {
      parse_kserve_http_infer(body, length);
    } catch (const ApiError& e) {
      return e.status();
    }
    return 0;
  };
  EXPECT_EQ(status("{"), 400);
  EXPECT_EQ(status(R"({"inputs":{}})"), 400);
  EXPECT_EQ(status(R"({"inputs":[{"name":"x","shape":[2],"datatype":"INT32","data":[1]}]})"), 400);
  EXPECT_EQ(status(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":["a"]}]})"),
            400);
  EXPECT_EQ(status(R"({"inputs":[{"name":"x","shape":[1],"datatype":"BF16","data":[1]}]})"), 400);
  EXPECT_EQ(status(R"({"inputs":[]})", 100), 400);  // header length past the body
}

TEST(TrtLlmRequest, GreedyUnlessASamplingInputIsGiven) {
  TrtLlmRequest r = parse_trtllm_request(prompt(), ProtocolLimits{});
  EXPECT_EQ(r.text_input, "Hello");
  EXPECT_EQ(r.sampling.max_tokens, 8);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.text_rank, 2u);

  KServeTensor top_k = tensor("top_k", "INT32", {1, 1});
  top_k.integers = {40};
  KServeTensor seed = tensor("random_seed", "UINT64", {1, 1});
  seed.integers = {7};
  KServeTensor stream = tensor("stream", "BOOL", {1, 1});
  stream.integers = {1};
  KServeTensor stops = tensor("stop_words", "BYTES", {1, 3});
  stops.bytes = {".", "", "\n"};
  KServeTensor end = tensor("end_id", "INT32", {1});
  end.integers = {2};
  r = parse_trtllm_request(prompt({top_k, seed, stream, stops, end}), ProtocolLimits{});
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.seed, 7u);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{".", "\n"}));  // empty ones dropped
  EXPECT_TRUE(r.sampling.ignore_eos);
  EXPECT_EQ(r.sampling.stop_token_ids, std::vector<int32_t>{2});
}

TEST(TrtLlmRequest, ChecksNamesDatatypesAndShapes) {
  KServeInferRequest missing = prompt();
  missing.inputs.pop_back();
  EXPECT_NE(error_of(missing).find("'max_tokens' is missing"), std::string::npos);

  KServeTensor fp64 = tensor("temperature", "FP64", {1, 1});
  fp64.reals = {0.5};
  EXPECT_NE(error_of(prompt({fp64})).find("unexpected datatype FP64, expecting FP32"),
            std::string::npos);

  KServeTensor two = tensor("top_p", "FP32", {1, 2});
  two.reals = {0.5, 0.5};
  EXPECT_NE(error_of(prompt({two})).find("expects one element"), std::string::npos);

  KServeInferRequest batch2 = prompt();
  batch2.inputs[0].shape = {2, 1};
  batch2.inputs[0].bytes = {"a", "b"};
  EXPECT_NE(error_of(batch2).find("batch size 1"), std::string::npos);

  KServeTensor unknown = tensor("decoder_text_input", "BYTES", {1, 1});
  unknown.bytes = {"x"};
  EXPECT_NE(error_of(prompt({unknown})).find("unexpected inference input"), std::string::npos);

  KServeTensor beams = tensor("beam_width", "INT32", {1, 1});
  beams.integers = {2};
  EXPECT_NE(error_of(prompt({beams})).find("only 1"), std::string::npos);

  KServeInferRequest twice = prompt();
  twice.inputs.push_back(twice.inputs[1]);
  EXPECT_NE(error_of(twice).find("given twice"), std::string::npos);
}

TEST(KServeGenerate, InputsAtTheTopOrInParameters) {
  KServeInferRequest r = parse_kserve_generate(
      R"({"text_input":"Hi","max_tokens":3,"parameters":{"temperature":0.5,"stop_words":["x"]}})");
  TrtLlmRequest t = parse_trtllm_request(r, ProtocolLimits{});
  EXPECT_EQ(t.text_input, "Hi");
  EXPECT_EQ(t.sampling.max_tokens, 3);
  EXPECT_FLOAT_EQ(t.sampling.temperature, 0.5f);
  EXPECT_EQ(t.sampling.stop, std::vector<std::string>{"x"});
  EXPECT_THROW(parse_kserve_generate(R"({"text_input":"Hi","max_tokens":"3"})"), ApiError);
}

TEST(KServeBinaryOutputs, MovesDataAfterTheJson) {
  json response = {{"outputs",
                    {{{"name", "text_output"}, {"datatype", "BYTES"}, {"data", {"ab"}}},
                     {{"name", "cum_log_probs"}, {"datatype", "FP32"}, {"data", {-1.5}}}}}};
  KServeBinaryOutputs binary;
  binary.names = {"text_output"};
  const std::string blob = move_outputs_to_binary(response, binary);
  EXPECT_EQ(blob, raw_bytes({"ab"}));
  EXPECT_EQ(response["outputs"][0]["parameters"]["binary_data_size"], 6);
  EXPECT_FALSE(response["outputs"][0].contains("data"));
  EXPECT_TRUE(response["outputs"][1].contains("data"));
  binary.all = true;
  json again = {{"outputs", {{{"name", "cum_log_probs"}, {"datatype", "FP32"}, {"data", {2.0}}}}}};
  EXPECT_EQ(move_outputs_to_binary(again, binary), raw_of<float>(2.0f));
}

}  // namespace
}  // namespace inflight::frontend
