#include "frontend/tgi_protocol.h"

#include <gtest/gtest.h>

#include "frontend/api_error.h"
#include "frontend/json_fields.h"

namespace inflight::frontend {
namespace {

TgiRequest parse(const std::string& body) {
  return parse_tgi_request(parse_json_object(body), ProtocolLimits{});
}

int error_status(const std::string& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    return e.status();
  }
  return 0;
}

TEST(TgiRequest, GreedyByDefault) {
  TgiRequest r = parse(R"({"inputs":"Hello"})");
  EXPECT_EQ(r.inputs, "Hello");
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.max_tokens, 100);
  EXPECT_EQ(r.sampling.logprobs, 0);  // every token carries its logprob
  EXPECT_FALSE(r.details);
}

TEST(TgiRequest, Parameters) {
  TgiRequest r = parse(R"({"inputs":"x","parameters":{"max_new_tokens":5,"do_sample":true,
      "temperature":0.7,"top_k":10,"top_p":0.9,"repetition_penalty":1.1,"seed":42,
      "stop":["\n"],"details":true,"return_full_text":true,"top_n_tokens":3}})");
  EXPECT_EQ(r.sampling.max_tokens, 5);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.7f);
  EXPECT_EQ(r.sampling.top_k, 10);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(r.details);
  EXPECT_TRUE(r.return_full_text);
  EXPECT_EQ(r.top_n_tokens, 3);
  EXPECT_EQ(r.sampling.logprobs, 3);
  // Setting a sampling knob turns sampling on, as in TGI.
  EXPECT_FLOAT_EQ(parse(R"({"inputs":"x","parameters":{"top_k":5}})").sampling.temperature, 1.0f);
}

TEST(TgiRequest, TgiRanges) {
  EXPECT_EQ(error_status(R"({})"), 400);
  EXPECT_EQ(error_status(R"({"inputs":""})"), 400);
  EXPECT_EQ(error_status(R"({"inputs":5})"), 400);
  EXPECT_EQ(error_status(R"({"inputs":"x","parameters":[]})"), 400);
  EXPECT_EQ(error_status(R"({"inputs":"x","parameters":{"temperature":0}})"), 400);
  EXPECT_EQ(error_status(R"({"inputs":"x","parameters":{"top_p":1.0}})"), 400);
  EXPECT_EQ(error_status(R"({"inputs":"x","parameters":{"top_k":0}})"), 400);
  EXPECT_EQ(error_status(R"({"inputs":"x","parameters":{"max_new_tokens":0}})"), 400);
  EXPECT_EQ(error_status(R"({"inputs":"x","parameters":{"repetition_penalty":0}})"), 400);
  EXPECT_EQ(error_status(R"({"inputs":"x","parameters":{"best_of":2}})"), 400);
  EXPECT_EQ(error_status(R"({"inputs":"x","parameters":{"details":"yes"}})"), 400);
}

}  // namespace
}  // namespace inflight::frontend
