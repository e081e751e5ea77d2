#include "frontend/openai_protocol.h"

#include <gtest/gtest.h>

#include "frontend/api_error.h"
#include "frontend/json_fields.h"

namespace inflight::frontend {
namespace {

using json = nlohmann::ordered_json;

ProtocolLimits limits() {
  ProtocolLimits l;
  l.vocab_size = 1000;
  l.max_logprobs = 20;
  return l;
}

CompletionRequest completion(const std::string& body) {
  return parse_completion_request(parse_json_object(body), limits());
}

ChatCompletionRequest chat(const std::string& body) {
  return parse_chat_completion_request(parse_json_object(body), limits());
}

// The ApiError's status and param of parsing `body` as a completion request.
std::pair<int, std::string> completion_error(const std::string& body) {
  try {
    completion(body);
  } catch (const ApiError& e) {
    return {e.status(), e.param()};
  }
  return {0, ""};
}

std::pair<int, std::string> chat_error(const std::string& body) {
  try {
    chat(body);
  } catch (const ApiError& e) {
    return {e.status(), e.param()};
  }
  return {0, ""};
}

TEST(ParseJson, RejectsMalformedAndNonObjects) {
  EXPECT_THROW(parse_json_object("{"), ApiError);
  EXPECT_THROW(parse_json_object("[1]"), ApiError);
  EXPECT_THROW(parse_json_object(""), ApiError);
  EXPECT_THROW(parse_json_object("\"x\""), ApiError);
  EXPECT_NO_THROW(parse_json_object("{}"));
}

TEST(CompletionRequest, Defaults) {
  CompletionRequest r = completion(R"({"model":"m","prompt":"hi"})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "hi");
  EXPECT_EQ(r.options.model, "m");
  EXPECT_EQ(r.options.sampling.n, 1);
  EXPECT_EQ(r.options.sampling.temperature, 1.0f);
  EXPECT_EQ(r.options.sampling.max_tokens, 16);  // OpenAI's completions default
  EXPECT_FALSE(r.options.sampling.logprobs.has_value());
  EXPECT_FALSE(r.options.stream);
  EXPECT_TRUE(r.add_special_tokens);
}

TEST(CompletionRequest, PromptForms) {
  EXPECT_EQ(completion(R"({"prompt":["a","b"]})").prompts.size(), 2u);
  auto ids = completion(R"({"prompt":[1,2,3]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(ids.prompts[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  auto lists = completion(R"({"prompt":[[1,2],[3]]})");
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.prompts[1].token_ids, (std::vector<int32_t>{3}));
  EXPECT_EQ(completion_error(R"({"prompt":[1,5000]})"), std::make_pair(400, std::string("prompt")));
  EXPECT_EQ(completion_error(R"({"prompt":[-1]})").first, 400);
  EXPECT_EQ(completion_error(R"({"prompt":""})").first, 400);
  EXPECT_EQ(completion_error(R"({"prompt":[]})").first, 400);
  EXPECT_EQ(completion_error(R"({"prompt":[[]]})").first, 400);
  EXPECT_EQ(completion_error(R"({"prompt":5})").first, 400);
  EXPECT_EQ(completion_error(R"({"prompt":[{"a":1}]})").first, 400);
  EXPECT_EQ(completion_error(R"({"prompt":[1,"a"]})").first, 400);
  EXPECT_EQ(completion_error(R"({})"), std::make_pair(400, std::string("prompt")));
}

TEST(CompletionRequest, SamplingFields) {
  auto r = completion(R"({"prompt":"x","max_tokens":5,"temperature":0,"top_p":0.5,"n":2,
      "stop":"\n","seed":7,"logprobs":3,"presence_penalty":0.5,"frequency_penalty":-1,
      "top_k":40,"min_p":0.1,"repetition_penalty":1.2,"ignore_eos":true,"min_tokens":2,
      "user":"u","stop_token_ids":[2,3],"best_of":2,"logit_bias":{"5":-100,"17":2.5}})");
  const SamplingParams& s = r.options.sampling;
  EXPECT_EQ(s.max_tokens, 5);
  EXPECT_EQ(s.temperature, 0.0f);
  EXPECT_FLOAT_EQ(s.top_p, 0.5f);
  EXPECT_EQ(s.n, 2);
  EXPECT_EQ(s.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(s.logprobs, 3);
  EXPECT_EQ(r.logprobs, 3);
  EXPECT_FLOAT_EQ(s.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, -1.0f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p, 0.1f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.2f);
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(s.min_tokens, 2);
  EXPECT_EQ(s.stop_token_ids, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(s.logit_bias, (std::vector<std::pair<int32_t, float>>{{5, -100.0f}, {17, 2.5f}}));
  EXPECT_EQ(r.options.user, "u");
  // 2.0 is an integer to JSON; null means absent.
  EXPECT_EQ(
      completion(R"({"prompt":"x","max_tokens":2.0,"seed":null})").options.sampling.max_tokens, 2);
}

TEST(CompletionRequest, RejectsOutOfRangeAndWrongTypes) {
  using P = std::pair<int, std::string>;
  EXPECT_EQ(completion_error(R"({"prompt":"x","temperature":-1})"), P(400, "temperature"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","temperature":2.5})"), P(400, "temperature"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","temperature":"hot"})"), P(400, "temperature"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","top_p":0})"), P(400, "top_p"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","top_p":1.5})"), P(400, "top_p"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","n":0})"), P(400, "n"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","n":1.5})"), P(400, "n"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","max_tokens":0})"), P(400, "max_tokens"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","max_tokens":"5"})"), P(400, "max_tokens"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","max_tokens":1e30})"), P(400, "max_tokens"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","presence_penalty":3})"), P(400, "presence_penalty"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","frequency_penalty":-2.5})"),
            P(400, "frequency_penalty"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","repetition_penalty":0})"),
            P(400, "repetition_penalty"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","top_k":-2})"), P(400, "top_k"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","min_p":2})"), P(400, "min_p"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","logprobs":21})"), P(400, "logprobs"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","logprobs":true})"), P(400, "logprobs"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","stop":[1]})"), P(400, "stop"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","stop":[""]})"), P(400, "stop"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","stream":"yes"})"), P(400, "stream"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","stream_options":{"include_usage":true}})"),
            P(400, "stream_options"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","best_of":3})"), P(400, "best_of"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","max_tokens":2,"min_tokens":3})"),
            P(400, "min_tokens"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","stop_token_ids":[1000]})"),
            P(400, "stop_token_ids"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","suffix":"y"})"), P(400, "suffix"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","logit_bias":{"1000":5}})"), P(400, "logit_bias"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","logit_bias":{"-1":5}})"), P(400, "logit_bias"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","logit_bias":{"7x":5}})"), P(400, "logit_bias"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","logit_bias":{"7":101}})"), P(400, "logit_bias"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","logit_bias":{"7":"5"}})"), P(400, "logit_bias"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","logit_bias":[5]})"), P(400, "logit_bias"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","model":5})"), P(400, "model"));
  EXPECT_EQ(completion_error(R"({"prompt":"x","seed":"1"})"), P(400, "seed"));
}

TEST(CompletionRequest, StreamOptions) {
  auto r = completion(R"({"prompt":"x","stream":true,"stream_options":{"include_usage":true}})");
  EXPECT_TRUE(r.options.stream);
  EXPECT_TRUE(r.options.include_usage);
}

TEST(ChatRequest, MessagesAndDefaults) {
  auto r = chat(R"({"model":"m","messages":[{"role":"system","content":"s"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_FALSE(r.options.sampling.max_tokens.has_value());  // up to the context length
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_FALSE(r.add_special_tokens);
  EXPECT_FALSE(r.options.sampling.logprobs.has_value());
}

TEST(ChatRequest, MaxCompletionTokensAndLogprobs) {
  auto r = chat(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":9,
      "max_completion_tokens":4,"logprobs":true,"top_logprobs":2})");
  EXPECT_EQ(r.options.sampling.max_tokens, 4);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_EQ(r.options.sampling.logprobs, 2);
  auto plain = chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true})");
  EXPECT_EQ(plain.options.sampling.logprobs, 0);
}

TEST(ChatRequest, RejectsBadMessages) {
  using P = std::pair<int, std::string>;
  EXPECT_EQ(chat_error(R"({})"), P(400, "messages"));
  EXPECT_EQ(chat_error(R"({"messages":[]})"), P(400, "messages"));
  EXPECT_EQ(chat_error(R"({"messages":"hi"})"), P(400, "messages"));
  EXPECT_EQ(chat_error(R"({"messages":[5]})"), P(400, "messages[0]"));
  EXPECT_EQ(chat_error(R"({"messages":[{"content":"x"}]})"), P(400, "messages[0].role"));
  EXPECT_EQ(chat_error(R"({"messages":[{"role":"wizard","content":"x"}]})"),
            P(400, "messages[0].role"));
  EXPECT_EQ(chat_error(R"({"messages":[{"role":"user"}]})"), P(400, "messages[0].content"));
  EXPECT_EQ(chat_error(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})"),
            P(400, "messages[0].content"));
  EXPECT_EQ(chat_error(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})"),
            P(400, "top_logprobs"));
  EXPECT_EQ(chat_error(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,
      "top_logprobs":50})"),
            P(400, "top_logprobs"));
  EXPECT_EQ(chat_error(R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})"),
            P(400, "max_completion_tokens"));
  EXPECT_EQ(chat_error(R"({"messages":[{"role":"user","content":"x"}],"tools":{}})"),
            P(400, "tools"));
  // tool_choice: forcing a call needs tools (and a named one must be among them).
  for (const char* choice : {R"("required")", R"({"type":"function","function":{"name":"f"}})", "3",
                             R"("sometimes")", R"({"type":"function"})"}) {
    EXPECT_EQ(chat_error(std::string(R"({"messages":[{"role":"user","content":"x"}],"tools":[],
        "tool_choice":)") +
                         choice + "}"),
              P(400, "tool_choice"))
        << choice;
  }
  EXPECT_TRUE(chat(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"none"})")
                  .tool_choice_none);
  EXPECT_FALSE(chat(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"auto"})")
                   .tool_choice_none);
  EXPECT_EQ(chat_error(R"({"messages":[{"role":"user","content":"x"}],
      "response_format":{"type":"xml"}})"),
            P(400, "response_format.type"));
  // An assistant turn with tool calls may have null content.
  EXPECT_EQ(
      chat_error(R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{}]}]})").first,
      0);
}

TEST(ApiErrorShape, MatchesOpenAi) {
  std::string body = error_body(400, "bad \"thing\"", "temperature");
  json j = json::parse(body);
  EXPECT_EQ(j["error"]["message"], "bad \"thing\"");
  EXPECT_EQ(j["error"]["type"], "BadRequestError");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_EQ(j["error"]["code"], 400);
  EXPECT_TRUE(json::parse(error_body(404, "x"))["error"]["param"].is_null());
  EXPECT_EQ(json::parse(error_body(401, "x"))["error"]["type"], "AuthenticationError");
  // Invalid UTF-8 echoed from a request does not break the JSON.
  EXPECT_NO_THROW(json::parse(error_body(400, "bad \xff byte")));
}

}  // namespace
}  // namespace inflight::frontend
