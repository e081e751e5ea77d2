// OpenAI-compatible response bodies: whole responses and streamed chunks for
// /v1/completions ("text_completion") and /v1/chat/completions ("chat.completion",
// "chat.completion.chunk"), with usage (prompt_tokens_details.cached_tokens) and logprobs in
// each endpoint's own format.
//
// Streams follow OpenAI: a chat stream opens with one {"role": "assistant", "content": ""}
// delta per choice, each choice's last chunk carries its finish_reason, with
// stream_options.include_usage every chunk has "usage": null and a last chunk with no choices
// carries the usage; then kStreamDone. Streams are events (stream message payloads), not bytes:
// the transport frames them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/generation.h"
#include "frontend/openai_protocol.h"
#include "frontend/tool_calls.h"

namespace inflight {
class Tokenizer;
}

namespace inflight::frontend {

// The fields every response object of one request shares.
struct ResponseMeta {
  std::string id;  // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;
  std::string model;
  std::string system_fingerprint;
};

// prefix + 32 random hex digits.
std::string new_response_id(std::string_view prefix);
// Seconds since the epoch.
int64_t unix_now();

nlohmann::ordered_json usage_json(const Usage& usage);
// The JSON text of a body, invalid UTF-8 (partial token pieces) replaced by U+FFFD.
std::string dump_json(const nlohmann::ordered_json& j);

struct CompletionFormat {
  const Tokenizer* tokenizer = nullptr;
  ResponseMeta meta;
  int32_t n = 1;
  std::optional<int32_t> logprobs;
  bool include_usage = false;
  std::vector<std::string> echo;  // per prompt: text prepended to each choice (empty = none)
  std::vector<std::vector<int32_t>> prompt_tokens;  // per prompt (echo's logprobs)
  std::optional<int32_t> prompt_logprobs;           // vLLM's: choices carry prompt_logprobs
};

struct ChatFormat {
  const Tokenizer* tokenizer = nullptr;
  ResponseMeta meta;
  int32_t n = 1;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  std::optional<int32_t> prompt_logprobs;  // vLLM's: the response carries prompt_logprobs
  bool include_usage = false;
  // Set when the request offers tools (tool_choice not "none") and the server knows their
  // format (--tool-call-parser or the chat template's), or forces a call: calls in the output
  // become message.tool_calls, finish_reason "tool_calls"; a stream sends each call as OpenAI's
  // deltas as it is generated (tool_call_stream.h).
  std::optional<ToolCallParser> tool_parser;
  nlohmann::ordered_json tools;  // the request's tools (qwen3_coder's parameter types)
};

nlohmann::ordered_json completion_response(const CompletionFormat& format,
                                           GenerationResult& result);
nlohmann::ordered_json chat_completion_response(const ChatFormat& format, GenerationResult& result);

std::unique_ptr<StreamFormatter> completion_stream_formatter(CompletionFormat format);
std::unique_ptr<StreamFormatter> chat_stream_formatter(ChatFormat format);
// The opening role chunks of a chat stream, for `num_choices` choices.
std::vector<std::string> chat_stream_prologue(const ChatFormat& format, size_t num_choices);

}  // namespace inflight::frontend
