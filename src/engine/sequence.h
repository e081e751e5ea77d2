// Sequence: one stream of tokens that the scheduler brings up to date.
//
// A request starts as one sequence over its prompt. With n > 1 choices it forks after the
// prompt is computed: choice 0 keeps the sequence, choices 1..n-1 get their own, sharing the
// prompt's full KV blocks through reference counts.
//
// Lifecycle (the Scheduler makes every transition):
//   waiting --schedule--> running --finish--> finished
//      ^                     |
//      +-----preempt---------+   blocks freed, num_computed_tokens = 0 (recomputed later)
#pragma once

#include <cstdint>
#include <vector>

#include "inflight/request.h"

namespace inflight {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  int64_t id = 0;  // unique per engine; the last tiebreak of the scheduling order
  RequestId request_id = 0;
  int32_t choice = 0;       // which of the request's choices this sequence produces
  int32_t num_choices = 1;  // scheduler seats it takes: n until the fork, then 1
  int32_t priority = 0;     // lower first
  uint64_t arrival = 0;     // arrival order of the request

  std::vector<int32_t> token_ids;  // prompt, then generated tokens
  int32_t num_prompt_tokens = 0;
  // Tokens whose KV is in the cache. Invariant: 0 <= num_computed_tokens <= num_tokens().
  int32_t num_computed_tokens = 0;
  // Most tokens this sequence may ever hold (prompt + max_tokens); for admission checks.
  int32_t max_num_tokens = 0;

  std::vector<int32_t> block_table;    // KV blocks, in token order; empty unless running
  std::vector<uint64_t> block_hashes;  // prefix-cache keys of the full blocks of token_ids
  int32_t num_published_blocks = 0;    // leading blocks of block_table already in the cache

  SequenceStatus status = SequenceStatus::kWaiting;
  // A step computing this sequence was launched and its results are not applied yet: it is not
  // scheduled again (its next input follows from them), never preempted, and when it finishes
  // meanwhile its blocks are freed only once the step is over (Scheduler::finish_step).
  bool in_flight = false;
  int32_t num_preemptions = 0;
  // Prompt tokens found in the prefix cache at the first admission; -1 before it.
  int32_t num_cached_prompt_tokens = -1;
  // SamplingParams::prompt_logprobs is set: logits rows for prompt positions, no cache hits.
  bool wants_prompt_logprobs = false;
  // Prompt positions [0, this) whose next-token logprob was computed (kept over preemption).
  int32_t num_prompt_logprobs = 0;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  bool is_prefill_done() const { return num_computed_tokens >= num_prompt_tokens; }
  // Prompt positions in [begin, end) that still owe a logprob row: [max(begin, done), min(end,
  // prompt - 1)) (the last prompt position's logits give the first output token).
  int32_t prompt_logprob_rows(int32_t begin, int32_t end) const {
    if (!wants_prompt_logprobs) return 0;
    const int32_t from = begin > num_prompt_logprobs ? begin : num_prompt_logprobs;
    const int32_t to = end < num_prompt_tokens - 1 ? end : num_prompt_tokens - 1;
    return to > from ? to - from : 0;
  }
};

}  // namespace inflight
