#include "engine/prepared_request.h"

#include <random>

#include "core/check.h"
#include "tokenizer/tokenizer.h"

namespace inflight {
namespace {

Status invalid(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}

// A seed for requests that set none: different per request and per process.
uint64_t random_seed() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

}  // namespace

Result<PreparedRequest> prepare_request(Request request, const Tokenizer* tokenizer,
                                        const AdmissionLimits& limits, const Scheduler& scheduler) {
  SamplingParams& p = request.sampling;
  if (Status s = p.validate(); !s.ok()) return s;
  if (p.prompt_logprobs && *p.prompt_logprobs > limits.max_logprobs) {
    return invalid(fmt::format("prompt_logprobs = {} exceeds this engine's max_logprobs = {}",
                               *p.prompt_logprobs, limits.max_logprobs));
  }
  if (p.logprobs && *p.logprobs > limits.max_logprobs) {
    return invalid(fmt::format("logprobs = {} exceeds this engine's max_logprobs = {}", *p.logprobs,
                               limits.max_logprobs));
  }
  for (int32_t t : p.stop_token_ids) {
    if (t < 0 || t >= limits.vocab_size) {
      return invalid(fmt::format("stop_token_ids holds {}, outside the vocabulary [0, {})", t,
                                 limits.vocab_size));
    }
  }
  for (const auto& [t, bias] : p.logit_bias) {
    if (t < 0 || t >= limits.vocab_size) {
      return invalid(fmt::format("logit_bias holds token {}, outside the vocabulary [0, {})", t,
                                 limits.vocab_size));
    }
  }
  if (!p.stop.empty() && tokenizer == nullptr) {
    return Status(StatusCode::kUnsupported, "stop strings need a tokenizer; this engine has none");
  }

  PreparedRequest out;
  if (!request.prompt_token_ids.empty()) {
    out.prompt = std::move(request.prompt_token_ids);
    for (int32_t t : out.prompt) {
      if (t < 0 || t >= limits.vocab_size) {
        return invalid(fmt::format("prompt token id {} is outside the vocabulary [0, {})", t,
                                   limits.vocab_size));
      }
    }
  } else if (!request.prompt.empty()) {
    if (tokenizer == nullptr) {
      return Status(StatusCode::kUnsupported,
                    "text prompts need a tokenizer; pass prompt_token_ids instead");
    }
    try {
      // Special tokens written in the text (chat markup) become their ids, as Hugging Face
      // tokenizers do.
      out.prompt = tokenizer->encode(request.prompt, request.add_special_tokens,
                                     /*parse_special=*/true);
    } catch (const Error& e) {
      return invalid(fmt::format("cannot tokenize the prompt: {}", e.message()));
    }
    for (int32_t t : out.prompt) {
      if (t < 0 || t >= limits.vocab_size) {
        return invalid(
            fmt::format("the tokenizer produced id {} outside the model's vocabulary "
                        "[0, {})",
                        t, limits.vocab_size));
      }
    }
  }
  if (out.prompt.empty()) return invalid("the prompt is empty");

  const auto prompt_len = static_cast<int32_t>(out.prompt.size());
  if (prompt_len >= limits.max_model_len) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("the prompt has {} tokens but max_model_len is {}: leave room for "
                              "at least one generated token",
                              prompt_len, limits.max_model_len));
  }
  if (!p.max_tokens) p.max_tokens = limits.max_model_len - prompt_len;
  if (p.min_tokens > *p.max_tokens) {
    return invalid(fmt::format("min_tokens ({}) exceeds the {} tokens left after the prompt",
                               p.min_tokens, *p.max_tokens));
  }
  const int64_t total = int64_t{prompt_len} + *p.max_tokens;
  if (total > limits.max_model_len) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("prompt ({} tokens) + max_tokens ({}) = {} exceeds max_model_len "
                              "= {}; lower max_tokens to at most {}",
                              prompt_len, *p.max_tokens, total, limits.max_model_len,
                              limits.max_model_len - prompt_len));
  }
  out.max_num_tokens = static_cast<int32_t>(total);
  if (Status s = scheduler.check_fits(out.max_num_tokens, p.n); !s.ok()) return s;

  out.seed = p.seed ? *p.seed : random_seed();
  out.params = std::move(p);
  out.priority = request.priority;
  out.notify = std::move(request.notify);
  return out;
}

}  // namespace inflight
