// Text Generation Inference compatibility: POST /generate and POST /generate_stream.
//
//   {"inputs": "text", "parameters": {"max_new_tokens": 20, "do_sample": false, "temperature",
//    "top_k", "top_p", "repetition_penalty", "frequency_penalty", "seed", "stop": [...],
//    "details": true, "return_full_text": false, "top_n_tokens": 2, "best_of": 2,
//    "truncate": 1000, ...}}
//
//   -> {"generated_text": "...", "details": {"finish_reason": "length" | "eos_token" |
//       "stop_sequence", "generated_tokens": N, "seed": S | null, "prefill": [],
//       "tokens": [{"id", "text", "logprob", "special"}], "top_tokens": [...]}}
//
// The stream sends one event per token, {"index", "token": {...}, "top_tokens",
// "generated_text": null, "details": null}; the last one carries the whole generated_text and
// details {finish_reason, generated_tokens, seed, input_length}; with decoder_input_details the
// first carries "prefill" (the prompt's tokens and logprobs, as details.prefill of /generate).
// TGI's ranges apply: temperature, top_k, repetition_penalty > 0; top_p and typical_p in (0, 1).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "frontend/generation.h"
#include "frontend/openai_protocol.h"
#include "frontend/structured_output_fields.h"

namespace inflight {
class Tokenizer;
}

namespace inflight::frontend {

struct TgiRequest {
  std::string inputs;
  SamplingParams sampling;  // logprobs always on: every token carries its logprob
  bool details = false;
  bool return_full_text = false;
  int32_t top_n_tokens = 0;
  // best_of > 1: that many sampled sequences, the one of highest total logprob answers (the
  // others in details.best_of_sequences); never streamed. sampling.n == best_of.
  int32_t best_of = 1;
  std::optional<int32_t> truncate;  // keep only the prompt's last `truncate` tokens
  // details.prefill: the prompt's tokens with their logprobs (a stream's first event: prefill).
  bool decoder_input_details = false;
  std::optional<ParsedConstraint> constraint;  // parameters.grammar
};

TgiRequest parse_tgi_request(const nlohmann::ordered_json& body, const ProtocolLimits& limits);

struct TgiFormat {
  const Tokenizer* tokenizer = nullptr;
  TgiRequest request;
  std::vector<int32_t> prompt_tokens;  // for details.prefill
  size_t input_length = 0;             // prompt tokens
};

nlohmann::ordered_json tgi_response(const TgiFormat& format, GenerationResult& result);
std::unique_ptr<StreamFormatter> tgi_stream_formatter(TgiFormat format);

}  // namespace inflight::frontend
