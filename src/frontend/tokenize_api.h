// Tokenizing over a Frontend, in vLLM's shapes, whatever the transport:
//
//   {"prompt": "text", "add_special_tokens": true, "return_token_strs": false}
//   {"messages": [...], "add_generation_prompt": true, "add_special_tokens": false}
//     -> {"count": N, "max_model_len": M, "tokens": [...], "token_strs": null | [...]}
//   {"tokens": [...]} -> {"prompt": "text"}
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "frontend/frontend.h"

namespace inflight::frontend {

// POST /tokenize
nlohmann::ordered_json tokenize_request(const Frontend& frontend, std::string_view body);
// POST /detokenize
nlohmann::ordered_json detokenize_request(const Frontend& frontend, std::string_view body);

}  // namespace inflight::frontend
