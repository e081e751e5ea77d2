// SamplingParams: how one request turns logits into tokens and when it stops.
// Names follow the OpenAI API (and vLLM's extensions where OpenAI has none).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "inflight/status.h"

namespace inflight {

// A constraint on the output (structured output): every token generated keeps the text a prefix
// of something the constraint accepts, and EOS / stop tokens are allowed only once it is whole.
struct StructuredOutput {
  enum class Kind {
    kJsonSchema,  // `text`: a JSON Schema (JSON text)
    kJsonObject,  // any JSON object (`text` unused)
    kRegex,       // `text`: a regular expression the whole output matches
    kChoice,      // `choices`: the output is exactly one of them
    kGrammar,     // `text`: an EBNF / GBNF grammar with a `root` rule
  };
  Kind kind = Kind::kJsonObject;
  std::string text;
  std::vector<std::string> choices;
  // kJsonSchema: properties and items outside the schema are rejected (OpenAI's `strict`);
  // otherwise they are allowed where the schema does not forbid them.
  bool strict = true;
};

// "json_schema", "json_object", "regex", "choice", "grammar".
std::string_view structured_output_kind_name(StructuredOutput::Kind kind);

struct SamplingParams {
  // Number of choices generated for the prompt; they share the prompt's KV blocks. >= 1.
  int32_t n = 1;

  // 0 = greedy (argmax, ties to the lowest token id); otherwise logits are divided by it. >= 0.
  float temperature = 1.0f;
  // Keep the k most likely tokens; 0 or -1 = all.
  int32_t top_k = 0;
  // Keep the smallest set of most likely tokens whose probability reaches top_p. (0, 1].
  float top_p = 1.0f;
  // Drop tokens whose probability is below min_p times the most likely one's. [0, 1].
  float min_p = 0.0f;

  // HF-style penalty on every token seen in the prompt or output (logit / p if > 0, else * p).
  // > 0; 1 = off.
  float repetition_penalty = 1.0f;
  // OpenAI penalties on output tokens: logit -= frequency * count + presence * (count > 0).
  // [-2, 2].
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;

  // OpenAI logit_bias: added to the logit of each listed token (after the penalties, before
  // temperature and the top-k/p/min-p filters). Biases in [-100, 100]: -100 bans a token in
  // practice, +100 all but forces it. Distinct token ids.
  std::vector<std::pair<int32_t, float>> logit_bias;

  // Same seed + same prompt -> same output, whatever else is in the batch. Unset: a random seed
  // is drawn at enqueue.
  std::optional<uint64_t> seed;

  // Most tokens generated per choice; unset = up to the model's context length.
  std::optional<int32_t> max_tokens;
  // EOS and stop token ids are suppressed until this many tokens were generated.
  int32_t min_tokens = 0;
  // Keep generating past the model's EOS tokens (stop_token_ids still apply).
  bool ignore_eos = false;
  // Generation stops after any of these tokens (the token is part of the output).
  std::vector<int32_t> stop_token_ids;
  // Generation stops when the output text contains any of these (matched across token
  // boundaries); the matched string is trimmed unless include_stop_str_in_output.
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;

  // Log-probabilities of each generated token plus this many most likely alternatives
  // (0 = the chosen token only); unset = none. Taken from the raw model logits, before
  // penalties and temperature.
  std::optional<int32_t> logprobs;
  // Log-probabilities of every prompt token after the first, given the tokens before it, plus
  // this many most likely alternatives (vLLM's prompt_logprobs); unset = none. Such a prompt is
  // computed in full: it takes no prefix-cache hits.
  std::optional<int32_t> prompt_logprobs;

  // Leave special tokens (BOS, EOS, chat markers) out of the output text.
  bool skip_special_tokens = true;

  // Constrained decoding; unset = free text.
  std::optional<StructuredOutput> structured_output;

  // Checks the ranges above; the engine additionally checks token ids against the vocabulary
  // and logprobs against its max_logprobs. kInvalidArgument naming the field.
  Status validate() const;
};

}  // namespace inflight
