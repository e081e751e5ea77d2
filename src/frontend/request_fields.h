// The fields each API reads from a request body, and what happens to the others: a client
// that sends a field this server does not act on is told so rather than silently ignored.
//
//   check_fields(body, RequestApi::kChatCompletion, limits);   // after parsing
//
// An unknown field is logged once per API and name (a warning naming it), or, when
// ProtocolLimits::reject_unknown_fields is set (serve --strict), answered with 400 naming it.
#pragma once

#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

#include "frontend/openai_protocol.h"

namespace inflight::frontend {

enum class RequestApi {
  kCompletion,      // POST /v1/completions
  kChatCompletion,  // POST /v1/chat/completions
  kTgi,             // POST /, /generate, /generate_stream (and their "parameters" object)
};

// The top-level fields `api` reads besides, for the OpenAI routes, known_openai_fields(); for
// TGI, the fields of "parameters".
std::span<const std::string_view> known_fields(RequestApi api);
std::span<const std::string_view> known_openai_fields();
std::span<const std::string_view> known_tgi_parameters();

// Logs or refuses (see above) the fields of `body` that `api` does not read.
void check_fields(const nlohmann::ordered_json& body, RequestApi api, const ProtocolLimits& limits);

}  // namespace inflight::frontend
