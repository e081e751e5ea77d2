// Request sets for `inflight bench serve`: what each request asks and how long its answer
// should be. Both generators are deterministic for a given seed and tokenizer.
//
// random   Prompts of random ordinary token ids, decoded to text and re-tokenized until the text
//          is exactly prefix_len + input_len_i tokens long (decode -> encode is not the identity:
//          pieces merge or split at the seams). input_len_i and output_len_i are uniform integers
//          in [floor(L * (1 - range_ratio)), ceil(L * (1 + range_ratio))]. A prefix of
//          prefix_len random tokens is shared by every prompt (a prefix-cache workload).
// prompts  A ShareGPT-shaped JSON file ([{"conversations": [{"from": "human", "value": ...},
//          {"from": "gpt", "value": ...}?]}]), shuffled with the seed. The prompt is the first
//          human turn; the output length is fixed_output_len when given, else the token count
//          of the reply that follows the prompt, else drawn from a log-normal distribution
//          with median 128 tokens and sigma 0.75, rounded and clipped to [4, 1024] (a
//          ShareGPT-like skew: many short answers, a long tail). As in vLLM, conversations
//          with fewer than 4 prompt or output tokens, more than 1024 prompt tokens or more than
//          2048 in all are skipped; when fewer remain than requested, the set repeats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inflight::bench {

class TokenCodec;

struct BenchRequest {
  std::string prompt;
  int32_t prompt_len = 0;  // tokens, counted without special tokens
  int32_t output_len = 0;  // max_tokens asked for
};

struct RandomDatasetOptions {
  int32_t num_prompts = 1000;
  int32_t input_len = 1024;
  int32_t output_len = 128;
  int32_t prefix_len = 0;
  double range_ratio = 0.0;  // [0, 1)
  uint64_t seed = 0;
};

std::vector<BenchRequest> random_dataset(const RandomDatasetOptions& options,
                                         const TokenCodec& codec);

struct PromptsDatasetOptions {
  int32_t num_prompts = 1000;
  std::optional<int32_t> fixed_output_len;
  uint64_t seed = 0;
};

// One conversation of a ShareGPT-shaped file.
struct Conversation {
  std::string prompt;
  std::optional<std::string> reply;
};

// Throws Error(kInvalidFile) when the text is not a ShareGPT-shaped JSON array; items without a
// human turn are left out.
std::vector<Conversation> parse_sharegpt(std::string_view json_text);

std::vector<BenchRequest> prompts_dataset(const std::vector<Conversation>& conversations,
                                          const PromptsDatasetOptions& options,
                                          const TokenCodec& codec);

}  // namespace inflight::bench
