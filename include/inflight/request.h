// Request (what a client asks for) and RequestOutput (what the engine streams back).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "inflight/sampling_params.h"

namespace inflight {

using RequestId = uint64_t;
using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

struct Request {
  // The prompt as text, tokenized by the engine; ignored when prompt_token_ids is not empty.
  std::string prompt;
  // The prompt as token ids, used as given.
  std::vector<int32_t> prompt_token_ids;
  // Text prompts only: let the tokenizer add its special tokens (e.g. BOS).
  bool add_special_tokens = true;

  SamplingParams sampling;

  // Lower values are scheduled first and preempted last; ties go by arrival.
  int32_t priority = 0;

  // Called on the engine thread each time outputs of this request are queued on its stream.
  // NOTE: it runs inside the engine loop: it must be quick and must not block or call back into
  // the engine (post to an executor, signal a condition variable, ...).
  std::function<void()> notify;
};

enum class FinishReason {
  kStop,    // EOS, a stop token id or a stop string
  kLength,  // max_tokens, or the model's context length
  kAbort,   // cancelled, or the engine shut down without draining
  kError,   // the request failed inside the engine (message in RequestOutput::error)
};

// "stop", "length", "abort", "error" (OpenAI's finish_reason values where they exist).
std::string_view finish_reason_name(FinishReason reason);

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  // 1 + the number of tokens more likely than it (prompt logprobs; 0 where not computed).
  int32_t rank = 0;
  // The most likely tokens at this position, most likely first: (token id, logprob).
  std::vector<std::pair<int32_t, float>> top;
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;     // over all choices
  int32_t cached_prompt_tokens = 0;  // prompt tokens whose KV came from the prefix cache
};

// Times of one request's milestones (steady clock). Unset points hold TimePoint{}.
struct RequestTimings {
  TimePoint arrival;          // enqueue() returned
  TimePoint first_scheduled;  // first step that computed any of its tokens
  TimePoint first_token;      // first output token (any choice)
  TimePoint last_token;
  TimePoint finished;

  double queue_seconds() const { return seconds(arrival, first_scheduled); }
  double ttft_seconds() const { return seconds(arrival, first_token); }
  double e2e_seconds() const { return seconds(arrival, finished); }

  static double seconds(TimePoint from, TimePoint to) {
    if (from == TimePoint{} || to == TimePoint{}) return 0.0;
    return std::chrono::duration<double>(to - from).count();
  }
};

// One event of a request's stream: what one choice produced in one engine step.
struct RequestOutput {
  RequestId id = 0;
  int32_t index = 0;  // the choice, 0 .. n-1

  std::vector<int32_t> token_ids;  // tokens generated this step (usually one)
  // Text made complete by these tokens: whole UTF-8 characters only, with stop strings and
  // anything that may still turn out to start one held back.
  std::string text;
  std::vector<TokenLogprob> logprobs;  // one per token, when SamplingParams::logprobs is set
  // SamplingParams::prompt_logprobs: one per prompt token from the second on, on the first
  // output of choice 0 (computed before any token is generated).
  std::vector<TokenLogprob> prompt_logprobs;
  TimePoint time;  // when the step that produced it ended

  // Set on the last output of this choice.
  std::optional<FinishReason> finish_reason;
  std::string stop_string;               // the stop string that matched, if one did
  std::optional<int32_t> stop_token_id;  // the stop token (EOS or stop_token_ids) that matched
  std::string error;                     // why, for FinishReason::kError

  // The last output of the whole request (every choice finished): usage and timings are set.
  bool request_finished = false;
  Usage usage;
  RequestTimings timings;
};

}  // namespace inflight
