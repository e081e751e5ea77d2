#include "frontend/openai_protocol.h"

#include <fmt/format.h>

#include <limits>

#include "frontend/api_error.h"
#include "frontend/json_fields.h"
#include "frontend/request_fields.h"

namespace inflight::frontend {

using json = nlohmann::ordered_json;

namespace {

constexpr int64_t kMaxTokensCap = std::numeric_limits<int32_t>::max();

// Fields shared by completions and chat completions.
GenerationOptions parse_options(const json& body, const ProtocolLimits& limits) {
  FieldReader r(body);
  GenerationOptions o;
  o.model = r.string("model").value_or("");
  o.user = r.string("user").value_or("");
  o.stream = r.boolean("stream").value_or(false);
  if (const json* so = r.get("stream_options")) {
    if (!so->is_object()) {
      throw_bad_request("'stream_options' must be an object", "stream_options");
    }
    if (!o.stream) {
      throw_bad_request("'stream_options' is only allowed when 'stream' is true", "stream_options");
    }
    o.include_usage = FieldReader(*so).boolean("include_usage").value_or(false);
  }

  SamplingParams& s = o.sampling;
  s.n = static_cast<int32_t>(r.integer("n", 1, limits.max_n).value_or(1));
  if (auto best_of = r.integer("best_of", 1, limits.max_n); best_of && *best_of != s.n) {
    throw_bad_request("'best_of' different from 'n' is not supported", "best_of");
  }
  s.temperature = static_cast<float>(r.number("temperature", 0, 2).value_or(1.0));
  s.top_p = static_cast<float>(r.positive_number("top_p", 0, 1).value_or(1.0));
  s.top_k =
      static_cast<int32_t>(r.integer("top_k", -1, std::numeric_limits<int32_t>::max()).value_or(0));
  s.min_p = static_cast<float>(r.number("min_p", 0, 1).value_or(0.0));
  s.presence_penalty = static_cast<float>(r.number("presence_penalty", -2, 2).value_or(0.0));
  s.frequency_penalty = static_cast<float>(r.number("frequency_penalty", -2, 2).value_or(0.0));
  s.repetition_penalty =
      static_cast<float>(r.positive_number("repetition_penalty", 0, 2).value_or(1.0));
  if (auto seed = r.integer("seed", std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max())) {
    s.seed = static_cast<uint64_t>(*seed);
  }
  s.stop = r.string_or_list("stop", static_cast<size_t>(limits.max_stop));
  s.stop_token_ids = r.int_list("stop_token_ids", 0, limits.vocab_size - 1);
  s.ignore_eos = r.boolean("ignore_eos").value_or(false);
  s.skip_special_tokens = r.boolean("skip_special_tokens").value_or(true);
  s.include_stop_str_in_output = r.boolean("include_stop_str_in_output").value_or(false);
  s.min_tokens = static_cast<int32_t>(r.integer("min_tokens", 0, kMaxTokensCap).value_or(0));
  if (auto n = r.integer("prompt_logprobs", 0, limits.max_logprobs)) {
    s.prompt_logprobs = static_cast<int32_t>(*n);
  }

  s.logit_bias = r.token_bias_map("logit_bias", limits.vocab_size - 1);
  o.constraint = parse_openai_constraint(body);
  if (o.constraint) s.structured_output = o.constraint->constraint;
  if (r.get("suffix") != nullptr) throw_bad_request("'suffix' is not supported", "suffix");
  return o;
}

// max_tokens (and chat's max_completion_tokens, which wins when both are given).
void parse_max_tokens(const json& body, bool chat, SamplingParams& s,
                      std::optional<int32_t> fallback) {
  FieldReader r(body);
  std::optional<int64_t> max_tokens = r.integer("max_tokens", 1, kMaxTokensCap);
  if (chat) {
    if (auto mct = r.integer("max_completion_tokens", 1, kMaxTokensCap)) max_tokens = mct;
  }
  if (max_tokens) {
    s.max_tokens = static_cast<int32_t>(*max_tokens);
  } else {
    s.max_tokens = fallback;
  }
  if (s.max_tokens && s.min_tokens > *s.max_tokens) {
    throw_bad_request(fmt::format("'min_tokens' ({}) must not exceed 'max_tokens' ({})",
                                  s.min_tokens, *s.max_tokens),
                      "min_tokens");
  }
}

PromptInput token_prompt(const json& ids, const ProtocolLimits& limits) {
  PromptInput p;
  for (const auto& id : ids) {
    if (!id.is_number_integer()) {
      throw_bad_request("'prompt' token lists must hold integers", "prompt");
    }
    int64_t x = id.get<int64_t>();
    if (x < 0 || x >= limits.vocab_size) {
      throw_bad_request(fmt::format("'prompt' token id {} is outside the vocabulary [0, {})", x,
                                    limits.vocab_size),
                        "prompt");
    }
    p.token_ids.push_back(static_cast<int32_t>(x));
  }
  if (p.token_ids.empty()) throw_bad_request("'prompt' must not be empty", "prompt");
  return p;
}

// string | [string, ...] | [int, ...] | [[int, ...], ...]
std::vector<PromptInput> parse_prompts(const json& body, const ProtocolLimits& limits) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw_bad_request("'prompt' is required", "prompt");
  const json& prompt = *it;
  std::vector<PromptInput> out;
  auto text = [&](const json& s) {
    if (s.get_ref<const std::string&>().empty()) {
      throw_bad_request("'prompt' must not be empty", "prompt");
    }
    out.push_back(PromptInput{s.get<std::string>(), {}});
  };
  if (prompt.is_string()) {
    text(prompt);
  } else if (prompt.is_array() && !prompt.empty()) {
    if (prompt[0].is_number_integer()) {
      out.push_back(token_prompt(prompt, limits));
    } else {
      for (const auto& item : prompt) {
        if (item.is_string()) {
          text(item);
        } else if (item.is_array()) {
          out.push_back(token_prompt(item, limits));
        } else {
          throw_bad_request(
              "'prompt' must be a string, a list of strings, a list of token ids "
              "or a list of token-id lists",
              "prompt");
        }
      }
    }
  } else {
    throw_bad_request(
        "'prompt' must be a non-empty string, a list of strings, a list of token "
        "ids or a list of token-id lists",
        "prompt");
  }
  return out;
}

// OpenAI content: a string, or a list of parts of which only text parts are served here.
std::string message_text(const json& content, size_t index) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return "";
  std::string param = fmt::format("messages[{}].content", index);
  if (!content.is_array()) throw_bad_request("message content must be a string or a list", param);
  std::string text;
  bool first = true;
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      throw_bad_request("content parts must be objects with a 'type'", param);
    }
    const std::string& type = part["type"].get_ref<const std::string&>();
    if (type != "text") {
      throw_bad_request(fmt::format("content part type '{}' is not supported", type), param);
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      throw_bad_request("a text part needs a string 'text'", param);
    }
    if (!first) text += '\n';  // parts join with newlines, as vLLM's "string" content format
    text += part["text"].get<std::string>();
    first = false;
  }
  return text;
}

json parse_messages(const json& body) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) throw_bad_request("'messages' is required", "messages");
  if (!it->is_array() || it->empty()) {
    throw_bad_request("'messages' must be a non-empty list", "messages");
  }
  json messages = json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw_bad_request("each message must be an object", param);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      throw_bad_request("each message needs a string 'role'", param + ".role");
    }
    static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool", "function"};
    bool known = false;
    for (const char* r : kRoles) known = known || *role == r;
    if (!known) {
      throw_bad_request(fmt::format("unknown role '{}'", role->get<std::string>()),
                        param + ".role");
    }
    json copy = m;  // keep other keys (name, tool_calls, tool_call_id) for the template
    auto content = m.find("content");
    bool has_tool_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    if ((content == m.end() || content->is_null()) && !(*role == "assistant" && has_tool_calls)) {
      throw_bad_request("each message needs 'content'", param + ".content");
    }
    copy["content"] = message_text(content == m.end() ? json() : *content, i);
    messages.push_back(std::move(copy));
  }
  return messages;
}

}  // namespace

CompletionRequest parse_completion_request(const json& body, const ProtocolLimits& limits) {
  check_fields(body, RequestApi::kCompletion, limits);
  CompletionRequest req;
  req.options = parse_options(body, limits);
  parse_max_tokens(body, /*chat=*/false, req.options.sampling, 16);  // OpenAI's default: 16
  req.prompts = parse_prompts(body, limits);
  FieldReader r(body);
  req.echo = r.boolean("echo").value_or(false);
  req.add_special_tokens = r.boolean("add_special_tokens").value_or(true);
  if (auto lp = r.integer("logprobs", 0, limits.max_logprobs)) {
    req.logprobs = static_cast<int32_t>(*lp);
    req.options.sampling.logprobs = req.logprobs;
  }
  return req;
}

ChatCompletionRequest parse_chat_completion_request(const json& body,
                                                    const ProtocolLimits& limits) {
  check_fields(body, RequestApi::kChatCompletion, limits);
  ChatCompletionRequest req;
  req.options = parse_options(body, limits);
  parse_max_tokens(body, /*chat=*/true, req.options.sampling, std::nullopt);
  req.messages = parse_messages(body);
  FieldReader r(body);
  req.add_generation_prompt = r.boolean("add_generation_prompt").value_or(true);
  req.continue_final_message = r.boolean("continue_final_message").value_or(false);
  if (req.add_generation_prompt && req.continue_final_message) {
    throw_bad_request("'continue_final_message' and 'add_generation_prompt' cannot both be true",
                      "continue_final_message");
  }
  req.add_special_tokens = r.boolean("add_special_tokens").value_or(false);
  req.logprobs = r.boolean("logprobs").value_or(false);
  if (auto top = r.integer("top_logprobs", 0, limits.max_logprobs)) {
    if (!req.logprobs) {
      throw_bad_request("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
    }
    req.top_logprobs = static_cast<int32_t>(*top);
  }
  if (req.logprobs) req.options.sampling.logprobs = req.top_logprobs;
  for (const char* legacy : {"functions", "function_call"}) {
    if (r.get(legacy) != nullptr) {
      throw_bad_request(fmt::format("'{}' (OpenAI's deprecated function calling) is not "
                                    "supported: send 'tools' and 'tool_choice'",
                                    legacy),
                        legacy);
    }
  }
  if (const json* tools = r.get("tools")) {
    if (!tools->is_array()) throw_bad_request("'tools' must be a list", "tools");
    req.tools = *tools;
  }
  if (const json* choice = r.get("tool_choice")) {
    if (!choice->is_string() && !choice->is_object()) {
      throw_bad_request("'tool_choice' must be \"none\", \"auto\", \"required\" or an object",
                        "tool_choice");
    }
    std::optional<std::string> named;
    if (choice->is_object()) {
      const json* f = choice->contains("function") ? &(*choice)["function"] : nullptr;
      if (f == nullptr || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
        throw_bad_request(
            "a named 'tool_choice' must be {\"type\": \"function\", \"function\": {\"name\": "
            "...}}",
            "tool_choice");
      }
      named = (*f)["name"].get<std::string>();
    } else if (*choice != "none" && *choice != "auto" && *choice != "required") {
      throw_bad_request("'tool_choice' must be \"none\", \"auto\", \"required\" or an object",
                        "tool_choice");
    }
    if (named || *choice == "required") {
      ParsedConstraint calls = tool_call_constraint(req.tools, named);
      if (req.options.constraint) {
        throw_bad_request(fmt::format("'{}' and 'tool_choice' both constrain the output: give at "
                                      "most one",
                                      req.options.constraint->field),
                          "tool_choice");
      }
      req.options.sampling.structured_output = calls.constraint;
      req.options.constraint = std::move(calls);
      req.tool_choice_forced = true;
    }
    req.tool_choice_none = *choice == "none";
  }
  req.chat_template_kwargs = json::object();
  if (const json* kwargs = r.get("chat_template_kwargs")) {
    if (!kwargs->is_object()) {
      throw_bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    }
    req.chat_template_kwargs = *kwargs;
  }
  return req;
}

}  // namespace inflight::frontend
