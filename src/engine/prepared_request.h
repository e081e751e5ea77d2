// PreparedRequest: a Request validated and tokenized on the caller's thread, so that the
// engine loop never does either and a bad request fails in enqueue() with a clear Status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/scheduler.h"
#include "grammar/grammar_compiler.h"
#include "inflight/config.h"
#include "inflight/request.h"
#include "inflight/status.h"

namespace inflight {

class Tokenizer;

struct PreparedRequest {
  std::vector<int32_t> prompt;  // token ids, each in [0, vocab)
  SamplingParams params;        // validated; max_tokens resolved
  int32_t max_num_tokens = 0;   // prompt + max_tokens <= max_model_len
  uint64_t seed = 0;            // params.seed, or drawn at random
  int32_t priority = 0;
  std::function<void()> notify;
  // params.structured_output compiled (null without one).
  std::shared_ptr<const CompiledGrammar> grammar;
};

struct AdmissionLimits {
  int64_t vocab_size = 0;  // of the model: token ids must be below it
  int32_t max_model_len = 0;
  int32_t max_logprobs = 0;
};

// kInvalidArgument, kResourceExhausted (via scheduler.check_fits) or kUnsupported, with a
// message that says what to change. `tokenizer` may be null (token-id prompts only).
Result<PreparedRequest> prepare_request(Request request, const Tokenizer* tokenizer,
                                        const AdmissionLimits& limits, const Scheduler& scheduler);

}  // namespace inflight
