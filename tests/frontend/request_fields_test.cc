#include "frontend/request_fields.h"

#include <gtest/gtest.h>

#include "frontend/api_error.h"
#include "frontend/json_fields.h"
#include "frontend/openai_protocol.h"
#include "frontend/tgi_protocol.h"

namespace inflight::frontend {
namespace {

using json = nlohmann::ordered_json;

ProtocolLimits strict() {
  ProtocolLimits limits;
  limits.reject_unknown_fields = true;
  return limits;
}

std::string refused_field(const std::string& body, RequestApi api) {
  try {
    check_fields(parse_json_object(body), api, strict());
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "";
}

TEST(RequestFields, StrictRefusesFieldsNoRouteReads) {
  EXPECT_EQ(refused_field(R"({"prompt":"x","frobnicate":1})", RequestApi::kCompletion),
            "frobnicate");
  // Chat fields are not completion fields, and the other way round.
  EXPECT_EQ(refused_field(R"({"prompt":"x","messages":[]})", RequestApi::kCompletion), "messages");
  EXPECT_EQ(refused_field(R"({"messages":[],"echo":true})", RequestApi::kChatCompletion), "echo");
  EXPECT_EQ(refused_field(R"({"inputs":"x","parameters":{"adapter_id":"a"}})", RequestApi::kTgi),
            "parameters.adapter_id");
  EXPECT_EQ(refused_field(R"({"inputs":"x","temperature":1})", RequestApi::kTgi), "temperature");
}

TEST(RequestFields, EveryFieldTheParsersReadIsKnown) {
  // A body of every known field parses under strict limits past the field check: a failure
  // then names something other than an unknown field.
  for (RequestApi api : {RequestApi::kCompletion, RequestApi::kChatCompletion}) {
    json body = json::object();
    for (std::string_view f : known_openai_fields()) body[std::string(f)] = nullptr;
    for (std::string_view f : known_fields(api)) body[std::string(f)] = nullptr;
    EXPECT_NO_THROW(check_fields(body, api, strict()));
  }
  json params = json::object();
  for (std::string_view f : known_tgi_parameters()) params[std::string(f)] = nullptr;
  EXPECT_NO_THROW(check_fields(json{{"inputs", "x"}, {"parameters", params}, {"stream", false}},
                               RequestApi::kTgi, strict()));
}

TEST(RequestFields, WithoutStrictUnknownFieldsPass) {
  const json body = parse_json_object(R"({"prompt":"x","frobnicate":1})");
  EXPECT_NO_THROW(check_fields(body, RequestApi::kCompletion, ProtocolLimits{}));
  EXPECT_EQ(parse_completion_request(body, ProtocolLimits{}).prompts.size(), 1u);
  EXPECT_THROW(parse_completion_request(body, strict()), ApiError);
}

TEST(RequestFields, TgiBestOfAndTruncate) {
  ProtocolLimits limits;
  TgiRequest r = parse_tgi_request(
      parse_json_object(
          R"({"inputs":"x","parameters":{"best_of":3,"do_sample":true,"truncate":7}})"),
      limits);
  EXPECT_EQ(r.best_of, 3);
  EXPECT_EQ(r.sampling.n, 3);
  EXPECT_EQ(r.truncate, 7);
}

}  // namespace
}  // namespace inflight::frontend
