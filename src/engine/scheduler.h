// Scheduler: decides, each step, which sequences compute how many tokens (rule: scheduler.cc).
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <vector>

#include "engine/kv_block_manager.h"
#include "engine/sequence.h"
#include "inflight/config.h"
#include "inflight/status.h"

namespace inflight {

// Logits rows per step for prompt logprobs (SamplingParams::prompt_logprobs), beyond the one
// sample row each of max_num_seqs sequences may take.
inline constexpr int32_t kMaxPromptLogprobRows = 64;

struct ScheduledSequence {
  Sequence* seq = nullptr;
  // This step computes token_ids[num_computed_tokens, num_computed_tokens + num_new_tokens).
  int32_t num_new_tokens = 0;
  // The step reaches the last known token: its logits give the next token.
  bool sample = false;
  // Logits rows of prompt positions (Sequence::prompt_logprob_rows), before the sample row.
  int32_t prompt_rows = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledSequence> scheduled;  // running ones first, then newly admitted
  std::vector<Sequence*> preempted;          // running -> waiting in this step, blocks freed
  int32_t num_batched_tokens = 0;
  bool empty() const { return scheduled.empty(); }
};

class Scheduler {
 public:
  // `config` must be validated, with max_model_len resolved (> 0).
  Scheduler(const EngineConfig& config, KvBlockManager& kv);

  // Whether a request of `n` choices, each up to `max_num_tokens` tokens, can ever be served.
  // kResourceExhausted saying which limit it exceeds. Reads only the fixed configuration, so any
  // thread may call it.
  Status check_fits(int32_t max_num_tokens, int32_t n) const;

  // new -> waiting. The sequence must have passed check_fits().
  void add(Sequence* seq);

  // Picks this step's work among the sequences not in flight. Allocates blocks for it and may
  // preempt running sequences that are not in flight. Its sequences are in flight until
  // finish_step() or drop_step(). Empty when every sequence that could run waits for a step in
  // flight.
  SchedulerOutput schedule();

  // After the step ran: num_computed_tokens += num_new_tokens for each scheduled sequence and
  // its newly full blocks go into the prefix cache; its sequences are no longer in flight (the
  // blocks of those that finished meanwhile are freed).
  void finish_step(const SchedulerOutput& out);
  // A step that produced nothing (failed or abandoned): its sequences are no longer in flight,
  // their tokens unchanged (the blocks of those that finished meanwhile are freed).
  void drop_step(const SchedulerOutput& out);

  // Splits a running sequence that has just sampled its choices' first tokens: each child
  // (waiting to be born: no blocks, token_ids = the prompt + its first token) shares the
  // parent's full prompt blocks, recomputes the rest, and runs from now on. The parent then
  // takes one seat, each child one.
  void fork(Sequence& parent, std::span<Sequence* const> children);

  // waiting | running -> finished; frees its blocks, or once its step is over when it is in
  // flight. Idempotent.
  void finish(Sequence& seq);

  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
  const std::vector<Sequence*>& running() const { return running_; }

  uint64_t num_preemptions() const { return num_preemptions_; }
  uint64_t num_prefix_queries() const { return num_prefix_queries_; }  // tokens looked up
  uint64_t num_prefix_hits() const { return num_prefix_hits_; }        // tokens found
  double growth_ratio() const { return growth_ratio_; }  // admission's estimate (scheduler.cc)

  KvBlockManager& kv() { return kv_; }

  // Throws Error(kInternal) on any broken invariant of queues, seats, block tables and counts.
  void check_integrity() const;

 private:
  // Scheduling order: priority, then arrival, then id.
  struct Before {
    bool operator()(const Sequence* a, const Sequence* b) const;
  };

  // Tokens a sequence with `num_left` to compute gets this step: within the step's remaining
  // budget and the per-sequence long-prefill cap.
  int32_t chunk(int32_t num_left, int32_t budget) const;
  // Most sequences in the step being scheduled: ceil(n / max_num_micro_batches) of the n
  // sequences there are (running and waiting, up to max_num_seqs); no cap with one micro-batch.
  size_t max_seqs_per_step() const;
  // Returns true when a sequence must wait for a step in flight to free the victim it needs
  // (nothing more is scheduled then, waiting sequences included).
  bool schedule_running(SchedulerOutput& out, int32_t& budget, size_t max_seqs);
  void schedule_waiting(SchedulerOutput& out, int32_t& budget, size_t max_seqs);
  void preempt(Sequence& seq, SchedulerOutput& out);
  // Blocks `seq` is expected to hold in the end: its tokens and its expected growth
  // (growth_ratio_; the rule in scheduler.cc), for each of its choices.
  int64_t expected_blocks(const Sequence& seq) const;
  // Blocks the running sequences are expected to take beyond those they hold.
  int64_t expected_growth_blocks() const;
  // `seq`'s step is over: it is no longer in flight; frees it when it finished meanwhile.
  void end_flight(Sequence& seq);
  // Caps `num_new` tokens of `seq` from num_computed_tokens so that its prompt logprob rows fit
  // what is left of this step's kMaxPromptLogprobRows; records the rows in `s`. May return 0.
  int32_t fit_prompt_rows(const Sequence& seq, int32_t num_new, ScheduledSequence& s);
  void insert_running(Sequence* seq);

  EngineConfig config_;
  KvBlockManager& kv_;
  std::vector<Sequence*> running_;       // sorted by Before; the last is preempted first
  std::set<Sequence*, Before> waiting_;  // sorted by Before
  std::vector<Sequence*> finishing_;     // finished in flight: blocks kept until the step ends
  int32_t num_seats_ = 0;                // sum of num_choices over running_
  int32_t prompt_rows_ = 0;              // prompt logprob rows taken in the step being built
  // Admission's expected share of remaining max_tokens (scheduler.cc): at first and after a
  // preemption, at least, now, and the decrease per step.
  const double max_growth_ratio_;
  const double min_growth_ratio_;
  double growth_ratio_;
  const double growth_ratio_decay_;
  // Share of their (clipped) max_tokens that requests generated, over those that finished while
  // running (a moving average; < 0 before the first): the estimate does not decay below it.
  double used_share_ = -1.0;
  uint64_t num_preemptions_ = 0;
  uint64_t num_prefix_queries_ = 0;
  uint64_t num_prefix_hits_ = 0;
};

}  // namespace inflight
