// RequestState: one request inside the engine loop, from admission to its last output.
//
// It owns the request's sequences (one until the fork, then one per choice), turns each
// sampled token into outputs (incremental detokenization, stop tokens, stop strings,
// max_tokens) and queues them until flush() hands them to the client's stream. Only the engine
// thread touches it.
//
// Per choice: unborn (n > 1, before the fork) -> generating -> finished. The request is
// finished when every choice is; its last output then carries request_finished, usage and
// timings.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "engine/prepared_request.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/stop_matcher.h"
#include "engine/stream_state.h"
#include "grammar/grammar_matcher.h"
#include "inflight/stats.h"
#include "tokenizer/detokenizer.h"

namespace inflight {

// What a request needs from the loop while it processes one step's results.
struct StepContext {
  Scheduler& scheduler;
  Sampler& sampler;
  EngineStats& stats;
  std::atomic<int64_t>& next_seq_id;
  TimePoint now;
};

class RequestState {
 public:
  // `eos_ids`: the ids that end generation unless ignore_eos (sorted).
  RequestState(RequestId id, PreparedRequest prepared, const Tokenizer* tokenizer,
               std::span<const int32_t> eos_ids, int64_t seq_id, TimePoint arrival);

  RequestId id() const { return id_; }
  Sequence& root() { return *choices_[0].seq; }
  const std::shared_ptr<detail::StreamState>& stream() const { return stream_; }
  bool finished() const { return num_finished_ == static_cast<int32_t>(choices_.size()); }
  // A step in flight computes one of its sequences (which must outlive the step).
  bool in_flight() const;
  const RequestTimings& timings() const { return timings_; }
  int32_t num_prompt_tokens() const { return static_cast<int32_t>(prepared_.prompt.size()); }

  // A step that computes some of its tokens starts now.
  void on_scheduled(TimePoint now, EngineStats& stats);

  // How many best candidates of `seq`'s next logits row decide its token (and logprobs), or 0
  // when the sampler needs the whole row (Sampler::candidates_needed).
  int32_t candidates_needed(const Sequence& seq) const;
  // The structured-output matcher of `seq`'s next token (null when unconstrained).
  GrammarMatcher* matcher(const Sequence& seq) {
    return choices_[static_cast<size_t>(seq.choice)].matcher.get();
  }

  // Samples the next token of `seq` from its logits row (a whole row is modified), forking into
  // the n choices on the first token, then applies the stop rules and queues outputs. Finished
  // choices leave the scheduler (their blocks are freed) here.
  void on_logits(Sequence& seq, const LogitsView& logits, StepContext& ctx);
  // The whole logits row of the next prompt position owing a logprob (positions in order): the
  // logprob of the prompt token after it, kept for choice 0's first output.
  void on_prompt_logits(const LogitsView& logits, StepContext& ctx);

  // Finishes every unfinished choice with `reason` (kAbort when cancelled or at shutdown,
  // kError with `error`).
  void abort(FinishReason reason, std::string_view error, StepContext& ctx);

  // Hands the queued outputs to the stream, which wakes the client.
  void flush();

 private:
  struct Choice {
    std::unique_ptr<Sequence> seq;  // null while unborn
    std::unique_ptr<IncrementalDetokenizer> detok;
    std::unique_ptr<StopMatcher> stop;
    std::unique_ptr<GrammarMatcher> matcher;  // structured output, else null
    int32_t pending = -1;  // index in outbox_ of this choice's output of the current step
    TimePoint last_token;
    bool finished = false;
  };

  void fork(Sequence& parent, const LogitsView& logits, StepContext& ctx);
  int32_t sample(Sequence& seq, int32_t choice, const LogitsView& logits, StepContext& ctx,
                 TokenLogprob* logprob);
  void accept(int32_t choice, int32_t token, const TokenLogprob* logprob, StepContext& ctx);
  void finish_choice(int32_t choice, FinishReason reason, StepContext& ctx);
  std::string take_text(Choice& c, int32_t token, bool is_stop_token, bool last);
  RequestOutput& output(int32_t choice, TimePoint now);
  bool is_stop_token(int32_t token) const;
  void suppressed_tokens(const Sequence& seq, std::vector<int32_t>& out) const;

  RequestId id_;
  PreparedRequest prepared_;
  const Tokenizer* tokenizer_;
  std::vector<int32_t> stop_ids_;  // EOS (unless ignore_eos) and stop_token_ids, sorted
  std::shared_ptr<detail::StreamState> stream_;
  std::vector<Choice> choices_;  // [n]
  int32_t num_finished_ = 0;
  int32_t num_completion_tokens_ = 0;
  RequestTimings timings_;
  std::vector<RequestOutput> outbox_;
  std::vector<TokenLogprob> prompt_logprobs_;  // computed, not yet in an output
  int32_t num_prompt_logprobs_ = 0;            // computed so far (positions 0 .. this - 1)
  std::vector<float> fork_logits_;             // scratch: the parent's row, once per choice
  std::vector<int32_t> suppressed_;            // scratch
};

}  // namespace inflight
