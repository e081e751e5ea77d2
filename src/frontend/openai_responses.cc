#include "frontend/openai_responses.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "frontend/api_error.h"
#include "frontend/error_mapping.h"
#include "frontend/tool_call_stream.h"
#include "tokenizer/tokenizer.h"

namespace inflight::frontend {

using json = nlohmann::ordered_json;

namespace {

// JSON has no -inf; vLLM clamps the same way.
double finite_logprob(float lp) {
  return std::max(static_cast<double>(lp), -9999.0);
}

json finish_reason_json(const std::optional<FinishReason>& reason) {
  if (!reason) return nullptr;
  return std::string(finish_reason_name(*reason));
}

// vLLM's stop_reason: the stop string or stop token id that ended the choice; null for the
// model's end-of-sequence token, a length limit or an abort.
json stop_reason_json(const Tokenizer& tok, const std::string& stop_string,
                      const std::optional<int32_t>& token) {
  if (!stop_string.empty()) return stop_string;
  if (token && *token != tok.eos_id()) return *token;
  return nullptr;
}

json bytes_json(const std::string& piece) {
  json bytes = json::array();
  for (unsigned char ch : piece) bytes.push_back(static_cast<int>(ch));
  return bytes;
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]}
json chat_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprob>& logprobs,
                        int32_t top_n) {
  json content = json::array();
  for (const auto& lp : logprobs) {
    std::string piece = tok.token_piece(lp.token_id, false);
    json top = json::array();
    for (size_t i = 0; i < lp.top.size() && static_cast<int32_t>(i) < top_n; ++i) {
      std::string alt = tok.token_piece(lp.top[i].first, false);
      top.push_back({{"token", alt},
                     {"logprob", finite_logprob(lp.top[i].second)},
                     {"bytes", bytes_json(alt)}});
    }
    content.push_back({{"token", piece},
                       {"logprob", finite_logprob(lp.logprob)},
                       {"bytes", bytes_json(piece)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

// vLLM's prompt_logprobs: null for the first prompt token, then per token
// {"<id>": {"logprob", "rank", "decoded_token"}} for it and its most likely alternatives.
json prompt_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprob>& logprobs,
                          int32_t top_n) {
  json out = json::array({nullptr});
  for (const TokenLogprob& lp : logprobs) {
    json entry = json::object();
    entry[std::to_string(lp.token_id)] = {{"logprob", finite_logprob(lp.logprob)},
                                          {"rank", lp.rank},
                                          {"decoded_token", tok.token_piece(lp.token_id, false)}};
    for (size_t i = 0; i < lp.top.size() && static_cast<int32_t>(i) < top_n; ++i) {
      const int32_t id = lp.top[i].first;
      if (id == lp.token_id) continue;
      entry[std::to_string(id)] = {{"logprob", finite_logprob(lp.top[i].second)},
                                   {"rank", static_cast<int32_t>(i) + 1},
                                   {"decoded_token", tok.token_piece(id, false)}};
    }
    out.push_back(std::move(entry));
  }
  return out;
}

// Appends the entries of `logprobs` to the four arrays of a completions logprobs object.
void append_completion_logprobs(const Tokenizer& tok, const std::vector<TokenLogprob>& logprobs,
                                int32_t top_n, size_t& offset, json& text_offset,
                                json& token_logprobs, json& tokens, json& top_logprobs) {
  for (const auto& lp : logprobs) {
    std::string piece = tok.token_piece(lp.token_id, false);
    text_offset.push_back(offset);
    offset += piece.size();
    token_logprobs.push_back(finite_logprob(lp.logprob));
    json top = json::object();
    for (size_t i = 0; i < lp.top.size() && static_cast<int32_t>(i) < top_n; ++i) {
      top[tok.token_piece(lp.top[i].first, false)] = finite_logprob(lp.top[i].second);
    }
    if (!top.contains(piece)) top[piece] = finite_logprob(lp.logprob);
    top_logprobs.push_back(std::move(top));
    tokens.push_back(std::move(piece));
  }
}

// Completions: {"text_offset", "token_logprobs", "tokens", "top_logprobs"}; offsets count
// bytes of the choice's text from `offset` on.
json completion_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprob>& logprobs,
                              int32_t top_n, size_t& offset) {
  json text_offset = json::array(), token_logprobs = json::array(), tokens = json::array(),
       top_logprobs = json::array();
  append_completion_logprobs(tok, logprobs, top_n, offset, text_offset, token_logprobs, tokens,
                             top_logprobs);
  return {{"text_offset", std::move(text_offset)},
          {"token_logprobs", std::move(token_logprobs)},
          {"tokens", std::move(tokens)},
          {"top_logprobs", std::move(top_logprobs)}};
}

// echo with logprobs: the prompt's tokens first (the first without a logprob: null), then the
// choice's, offsets from the start of the echoed text; `offset` ends past the last token.
json echo_logprobs_json(const Tokenizer& tok, int32_t first_token,
                        const std::vector<TokenLogprob>& prompt,
                        const std::vector<TokenLogprob>& output, int32_t top_n, size_t& offset) {
  std::string first = tok.token_piece(first_token, false, /*first=*/true);
  offset = first.size();
  json text_offset = json::array({0}), token_logprobs = json::array({nullptr}),
       tokens = json::array({std::move(first)}), top_logprobs = json::array({nullptr});
  for (const auto* part : {&prompt, &output}) {
    append_completion_logprobs(tok, *part, top_n, offset, text_offset, token_logprobs, tokens,
                               top_logprobs);
  }
  return {{"text_offset", std::move(text_offset)},
          {"token_logprobs", std::move(token_logprobs)},
          {"tokens", std::move(tokens)},
          {"top_logprobs", std::move(top_logprobs)}};
}

json envelope(const ResponseMeta& meta, const char* object) {
  return {{"id", meta.id},
          {"object", object},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", meta.system_fingerprint}};
}

}  // namespace

std::string new_response_id(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:016x}", prefix, rng(), rng());
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens}}}};
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

// OpenAI's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}].
json tool_calls_json(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = json::object();
    call["id"] = new_response_id("call_");
    call["type"] = "function";
    call["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace

// ---- whole responses -------------------------------------------------------------------------

json completion_response(const CompletionFormat& format, GenerationResult& result) {
  json choices = json::array();
  for (size_t i = 0; i < result.choices.size(); ++i) {
    ChoiceResult& c = result.choices[i];
    size_t prompt = i / static_cast<size_t>(format.n);
    const bool echo = prompt < format.echo.size();
    std::string text = echo ? format.echo[prompt] + c.text : c.text;
    // A prompt's logprobs ride on its first choice.
    const std::vector<TokenLogprob>& prompt_lps =
        result.choices[prompt * static_cast<size_t>(format.n)].prompt_logprobs;
    json logprobs = nullptr;
    if (format.logprobs && echo) {
      size_t end = 0;
      logprobs = echo_logprobs_json(*format.tokenizer, format.prompt_tokens[prompt].front(),
                                    prompt_lps, c.logprobs, *format.logprobs, end);
    } else if (format.logprobs) {
      size_t offset = 0;
      logprobs = completion_logprobs_json(*format.tokenizer, c.logprobs, *format.logprobs, offset);
    }
    json choice = {
        {"index", i},
        {"text", std::move(text)},
        {"logprobs", std::move(logprobs)},
        {"finish_reason", finish_reason_json(c.finish_reason)},
        {"stop_reason", stop_reason_json(*format.tokenizer, c.stop_string, c.stop_token_id)}};
    if (format.prompt_logprobs) {
      choice["prompt_logprobs"] =
          prompt_logprobs_json(*format.tokenizer, prompt_lps, *format.prompt_logprobs);
    }
    choices.push_back(std::move(choice));
  }
  json body = envelope(format.meta, "text_completion");
  body["choices"] = std::move(choices);
  body["usage"] = usage_json(result.usage);
  return body;
}

json chat_completion_response(const ChatFormat& format, GenerationResult& result) {
  json choices = json::array();
  for (size_t i = 0; i < result.choices.size(); ++i) {
    ChoiceResult& c = result.choices[i];
    json logprobs = nullptr;
    if (format.logprobs) {
      logprobs = chat_logprobs_json(*format.tokenizer, c.logprobs, format.top_logprobs);
    }
    json content = std::move(c.text);
    json calls = json::array();
    json finish_reason = finish_reason_json(c.finish_reason);
    if (format.tool_parser) {
      ParsedOutput parsed =
          parse_tool_calls(*format.tool_parser, content.get<std::string>(), format.tools);
      if (!parsed.calls.empty()) {
        calls = tool_calls_json(parsed.calls);
        std::string rest = message_content(parsed);
        content = rest.empty() ? json(nullptr) : json(std::move(rest));
        finish_reason = "tool_calls";
      }
    }
    choices.push_back(
        {{"index", i},
         {"message",
          {{"role", "assistant"},
           {"content", std::move(content)},
           {"refusal", nullptr},
           {"tool_calls", std::move(calls)}}},
         {"logprobs", std::move(logprobs)},
         {"finish_reason", std::move(finish_reason)},
         {"stop_reason", stop_reason_json(*format.tokenizer, c.stop_string, c.stop_token_id)}});
  }
  json body = envelope(format.meta, "chat.completion");
  body["choices"] = std::move(choices);
  body["usage"] = usage_json(result.usage);
  if (format.prompt_logprobs) {
    body["prompt_logprobs"] = prompt_logprobs_json(
        *format.tokenizer, result.choices.at(0).prompt_logprobs, *format.prompt_logprobs);
  }
  return body;
}

// ---- streams ---------------------------------------------------------------------------------

namespace {

// What both stream formats share: choice numbering, usage summing, the usage chunk and [DONE].
class OpenAiStream : public StreamFormatter {
 public:
  OpenAiStream(const ResponseMeta& meta, const char* object, int32_t n, bool include_usage,
               const Tokenizer& tokenizer)
      : meta_(meta), object_(object), n_(n), include_usage_(include_usage), tokenizer_(tokenizer) {}

  void on_output(const TaggedOutput& tagged, std::vector<std::string>& events) override {
    const RequestOutput& o = tagged.output;
    if (o.request_finished) {
      usage_.prompt_tokens += o.usage.prompt_tokens;
      usage_.completion_tokens += o.usage.completion_tokens;
      usage_.cached_prompt_tokens += o.usage.cached_prompt_tokens;
    }
    size_t index = tagged.prompt * static_cast<size_t>(n_) + static_cast<size_t>(o.index);
    if (o.finish_reason == FinishReason::kError) {
      // OpenAI-style clients surface an `error` event (the body of the 500 a whole response
      // answers); the stream still ends with [DONE].
      events.push_back(error_body(engine_failure_error(o.error)));
      return;
    }
    json choices = make_choices(index, o);
    for (size_t i = 0; i < choices.size(); ++i) {
      json& choice = choices[i];
      const bool last = i + 1 == choices.size();
      if (!choice.contains("finish_reason"))
        choice["finish_reason"] = last ? finish_reason_json(o.finish_reason) : json(nullptr);
      if (o.finish_reason && last)
        choice["stop_reason"] = stop_reason_json(tokenizer_, o.stop_string, o.stop_token_id);
      emit(events, json::array({std::move(choice)}));
    }
  }

  void on_end(std::vector<std::string>& events) override {
    if (include_usage_) {
      json chunk = envelope(meta_, object_);
      chunk["choices"] = json::array();
      chunk["usage"] = usage_json(usage_);
      events.push_back(dump_json(chunk));
    }
    events.emplace_back(kStreamDone);
  }

 protected:
  // The choice objects of one output, each sent in a chunk of its own (an array, empty to send
  // nothing); the last gets the output's finish_reason unless it has one.
  virtual json make_choices(size_t index, const RequestOutput& o) = 0;

  void emit(std::vector<std::string>& events, json choices) {
    json chunk = envelope(meta_, object_);
    chunk["choices"] = std::move(choices);
    if (include_usage_) chunk["usage"] = nullptr;
    events.push_back(dump_json(chunk));
  }

  ResponseMeta meta_;
  const char* object_;
  int32_t n_;
  bool include_usage_;
  const Tokenizer& tokenizer_;
  Usage usage_;
};

class CompletionStream final : public OpenAiStream {
 public:
  explicit CompletionStream(CompletionFormat format)
      : OpenAiStream(format.meta, "text_completion", format.n, format.include_usage,
                     *format.tokenizer),
        format_(std::move(format)) {}

 private:
  json make_choices(size_t index, const RequestOutput& o) override {
    if (index >= offsets_.size()) offsets_.resize(index + 1, kNotStarted);
    const size_t prompt = index / static_cast<size_t>(n_);
    if (!o.prompt_logprobs.empty()) {  // on choice 0 of the prompt, before its first token
      if (prompt >= prompt_logprobs_.size()) prompt_logprobs_.resize(prompt + 1);
      prompt_logprobs_[prompt] = o.prompt_logprobs;
    }
    const bool first = offsets_[index] == kNotStarted;
    const bool echo = first && prompt < format_.echo.size();
    std::string text = echo ? format_.echo[prompt] : std::string();
    text += o.text;
    // Tokens whose text is held back (a partial character, a possible stop string) send
    // nothing unless their logprobs are wanted.
    if (text.empty() && !o.finish_reason && !(format_.logprobs && !o.logprobs.empty())) {
      return json::array();
    }
    if (first) offsets_[index] = 0;
    static const std::vector<TokenLogprob> kNone;
    const std::vector<TokenLogprob>& prompt_lps =
        prompt < prompt_logprobs_.size() ? prompt_logprobs_[prompt] : kNone;
    json logprobs = nullptr;
    if (format_.logprobs) {
      size_t& offset = offsets_[index];
      logprobs =
          echo && !format_.prompt_tokens[prompt].empty()
              ? echo_logprobs_json(*format_.tokenizer, format_.prompt_tokens[prompt].front(),
                                   prompt_lps, o.logprobs, *format_.logprobs, offset)
              : completion_logprobs_json(*format_.tokenizer, o.logprobs, *format_.logprobs, offset);
    }
    json choice = {{"index", index}, {"text", std::move(text)}, {"logprobs", std::move(logprobs)}};
    // vLLM's prompt_logprobs ride on each choice's first chunk.
    if (first && format_.prompt_logprobs) {
      choice["prompt_logprobs"] =
          prompt_logprobs_json(*format_.tokenizer, prompt_lps, *format_.prompt_logprobs);
    }
    return json::array({std::move(choice)});
  }

  static constexpr size_t kNotStarted = static_cast<size_t>(-1);
  CompletionFormat format_;
  std::vector<size_t> offsets_;  // per choice: text offset of the next token (logprobs)
  std::vector<std::vector<TokenLogprob>> prompt_logprobs_;  // per prompt, once they came
};

// A chat stream's opening chunk of one choice: {"role": "assistant", "content": ""}.
json role_chunk(const ChatFormat& format, size_t index) {
  json chunk = envelope(format.meta, "chat.completion.chunk");
  chunk["choices"] = json::array({{{"index", index},
                                   {"delta", {{"role", "assistant"}, {"content", ""}}},
                                   {"logprobs", nullptr},
                                   {"finish_reason", nullptr}}});
  if (format.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

class ChatStream final : public OpenAiStream {
 public:
  explicit ChatStream(ChatFormat format)
      : OpenAiStream(format.meta, "chat.completion.chunk", format.n, format.include_usage,
                     *format.tokenizer),
        format_(std::move(format)) {}

  void on_output(const TaggedOutput& tagged, std::vector<std::string>& events) override {
    // With prompt logprobs there is no prologue: each choice's role chunk goes out with its
    // first output, choice 0's carrying vLLM's prompt_logprobs (computed before any token).
    const auto index = static_cast<size_t>(tagged.output.index);
    if (format_.prompt_logprobs && tagged.output.finish_reason != FinishReason::kError) {
      if (index >= role_sent_.size()) role_sent_.resize(index + 1, false);
      if (!role_sent_[index]) {
        role_sent_[index] = true;
        json chunk = role_chunk(format_, index);
        if (index == 0) {
          chunk["prompt_logprobs"] = prompt_logprobs_json(
              *format_.tokenizer, tagged.output.prompt_logprobs, *format_.prompt_logprobs);
        }
        events.push_back(dump_json(chunk));
      }
    }
    OpenAiStream::on_output(tagged, events);
  }

 private:
  json make_choices(size_t index, const RequestOutput& o) override {
    json logprobs = nullptr;
    if (format_.logprobs) {
      logprobs = chat_logprobs_json(*format_.tokenizer, o.logprobs, format_.top_logprobs);
    }
    const bool wanted = o.finish_reason || (format_.logprobs && !o.logprobs.empty());
    if (!format_.tool_parser) {
      if (o.text.empty() && !wanted) return json::array();
      json delta = json::object();
      if (!o.text.empty() || !o.finish_reason) delta["content"] = o.text;
      return json::array({choice(index, std::move(delta), std::move(logprobs))});
    }
    // Content first, then each call's first delta and argument fragments, a chunk each; the
    // logprobs ride on the first chunk.
    if (index >= tool_streams_.size()) tool_streams_.resize(index + 1);
    std::optional<ToolCallStream>& stream = tool_streams_[index];
    if (!stream) stream.emplace(*format_.tool_parser, format_.tools);
    ToolCallDelta d = stream->add(o.text, o.finish_reason.has_value());
    json choices = json::array();
    if (!d.content.empty()) {
      choices.push_back(choice(index, {{"content", std::move(d.content)}}, nullptr));
    }
    for (ToolCallDelta::Call& call : d.calls) {
      json tool_call = {{"index", call.index}};
      if (call.first) {
        tool_call["id"] = new_response_id("call_");
        tool_call["type"] = "function";
        tool_call["function"] = {{"name", std::move(call.name)}, {"arguments", ""}};
      } else {
        tool_call["function"] = {{"arguments", std::move(call.arguments)}};
      }
      choices.push_back(
          choice(index, {{"tool_calls", json::array({std::move(tool_call)})}}, nullptr));
    }
    if (choices.empty() && wanted) choices.push_back(choice(index, json::object(), nullptr));
    if (!choices.empty()) choices[0]["logprobs"] = std::move(logprobs);
    if (o.finish_reason && stream->num_calls() > 0) choices.back()["finish_reason"] = "tool_calls";
    return choices;
  }

  static json choice(size_t index, json delta, json logprobs) {
    return {{"index", index}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)}};
  }

  ChatFormat format_;
  std::vector<std::optional<ToolCallStream>> tool_streams_;  // per choice, with a tool parser
  std::vector<bool> role_sent_;  // per choice, when the role chunk waits for prompt logprobs
};

}  // namespace

std::unique_ptr<StreamFormatter> completion_stream_formatter(CompletionFormat format) {
  return std::make_unique<CompletionStream>(std::move(format));
}

std::unique_ptr<StreamFormatter> chat_stream_formatter(ChatFormat format) {
  return std::make_unique<ChatStream>(std::move(format));
}

std::vector<std::string> chat_stream_prologue(const ChatFormat& format, size_t num_choices) {
  std::vector<std::string> events;
  for (size_t i = 0; i < num_choices; ++i) events.push_back(dump_json(role_chunk(format, i)));
  return events;
}

}  // namespace inflight::frontend
