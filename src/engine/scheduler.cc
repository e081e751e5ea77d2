// The one scheduling rule.
//
// Every sequence has num_tokens (its prompt plus what it generated) and num_computed_tokens
// (tokens whose KV is in the cache). Each step moves num_computed_tokens towards num_tokens
// under two limits: at most max_num_batched_tokens tokens in the step, and at most
// max_num_seqs sequences (seats) running. A prefill is a sequence far behind, a chunked
// prefill one that gets only part of the budget, a decode one exactly one token behind, a
// prefix-cache hit one whose num_computed_tokens starts above 0, a preempted one that fell back
// to 0: the same rule covers them all. A step that brings a sequence level with num_tokens
// samples its next token, which puts it one behind again.
//
// Order: running sequences first, then waiting ones; both in (priority, arrival) order. A
// running sequence that cannot get blocks preempts the lowest-priority, latest-arrived running
// sequence (itself if it is that one) until it fits: the victim's blocks are freed and it goes
// back to waiting with num_computed_tokens = 0, keeping every token, so it recomputes later
// and loses nothing. Waiting sequences are admitted in order until the first that does not fit
// (no skipping ahead, so nothing starves), and none at all in a step that preempted.
//
// Admission never accepts a request that could not run alone in the whole cache, so the
// preemption loop always ends with the first running sequence making progress.
//
// Admission also leaves room for growth. Each running sequence is expected to still generate
// growth_ratio x its remaining max_tokens (at most kMaxGrowthEstimate of them: a request without
// max_tokens may run to max_model_len, few do); a waiting sequence is admitted only if its blocks
// for the prompt and that much growth fit in the free blocks beyond those expected growths
// (when nothing runs it is admitted regardless). The ratio starts at 1 and, once requests have
// finished, decays each step towards the share of their (clipped) max_tokens that finished
// requests generated (a moving average, at least kMinGrowthRatio); a preemption shows the
// estimate was too low and sets it to 1 again. So long fixed-length generations (every request
// uses all its max_tokens) keep the ratio at 1: every admitted sequence runs to the end without
// evicting another, as TensorRT-LLM's GUARANTEED_NO_EVICT (the recomputation a preemption
// costs is what this avoids: Llama-3.1-8B offline 1000/1000 on one H100 preempted 253 of
// 2,048 requests with a fixed decay to 10%); chat traffic that stops early is admitted close
// to the optimistic limit. All ratios are scaled by EngineConfig::schedule_conservativeness
// and capped at 1; at 0 admission is optimistic (growth is left to preemption). SGLang's
// new-token-ratio rule decays to a fixed floor instead of the measured share.
//
// Micro-batches (max_num_micro_batches = D > 1, pipeline stages): up to D steps are in flight,
// each over its own sequences. A sequence in flight is skipped (its next input follows from the
// step's tokens), so the next step is filled from the others; each step takes at most
// ceil(n / D) of the n sequences there are (running and waiting, up to max_num_seqs), which
// leaves the next steps theirs. A sequence in flight is never preempted: when the victim the
// rule names is in flight, the sequence that needs blocks waits for a later step (and nothing is
// admitted in this one); once every step is over the rule applies as above. A sequence that
// finishes in flight (cancelled) leaves the queues at once but keeps its blocks until its step
// is over, so no later step is given blocks an earlier one still writes. With D = 1 a step is
// over before the next is scheduled, and none of this changes anything.
//
// A sequence whose prompt logprobs are wanted needs a logits row per prompt position: such rows
// come from their own budget of kMaxPromptLogprobRows per step (the runner reserves that many
// rows beyond max_num_seqs), and a prefill chunk is cut to the rows it gets.
#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "core/check.h"

namespace inflight {

namespace {

constexpr double kMinGrowthRatio = 0.1;
constexpr double kGrowthRatioDecaySteps = 600;  // from 1 to the least
constexpr int32_t kMaxGrowthEstimate = 4096;    // tokens
constexpr double kUsedShareWindow = 32;         // finished requests the used share averages

// Tokens of growth a sequence may still have: its remaining max_tokens, clipped.
int32_t growth_room(const Sequence& seq, int32_t from) {
  const int32_t left = seq.max_num_tokens > 0 ? seq.max_num_tokens - from : kMaxGrowthEstimate;
  return std::min(std::max(left, 0), kMaxGrowthEstimate);
}

}  // namespace

bool Scheduler::Before::operator()(const Sequence* a, const Sequence* b) const {
  return std::tie(a->priority, a->arrival, a->id) < std::tie(b->priority, b->arrival, b->id);
}

Scheduler::Scheduler(const EngineConfig& config, KvBlockManager& kv)
    : config_(config),
      kv_(kv),
      max_growth_ratio_(std::min(1.0, config.schedule_conservativeness)),
      min_growth_ratio_(std::min(1.0, kMinGrowthRatio * config.schedule_conservativeness)),
      growth_ratio_(max_growth_ratio_),
      growth_ratio_decay_((growth_ratio_ - min_growth_ratio_) / kGrowthRatioDecaySteps) {
  INFLIGHT_CHECK(config_.max_model_len > 0, "scheduler needs a resolved max_model_len");
  INFLIGHT_CHECK(config_.max_num_seqs > 0 && config_.max_num_batched_tokens > 0,
                 "scheduler limits must be positive");
}

Status Scheduler::check_fits(int32_t max_num_tokens, int32_t n) const {
  if (max_num_tokens > config_.max_model_len) {
    return {StatusCode::kResourceExhausted,
            fmt::format("the request needs up to {} tokens (prompt + max_tokens) but this "
                        "engine's max_model_len is {}; shorten the prompt or lower max_tokens",
                        max_num_tokens, config_.max_model_len)};
  }
  const int64_t blocks = kv_.blocks_for(max_num_tokens);
  if (blocks > kv_.num_blocks()) {
    return {StatusCode::kResourceExhausted,
            fmt::format("the request needs up to {} tokens = {} KV blocks of {} tokens, but the "
                        "whole KV cache has {} blocks; lower max_tokens or enlarge the cache",
                        max_num_tokens, blocks, kv_.block_size(), kv_.num_blocks())};
  }
  if (n > config_.max_num_seqs) {
    return {StatusCode::kResourceExhausted,
            fmt::format("n = {} choices exceed max_num_seqs = {}", n, config_.max_num_seqs)};
  }
  if (!config_.enable_chunked_prefill && max_num_tokens > config_.max_num_batched_tokens) {
    return {StatusCode::kResourceExhausted,
            fmt::format("the request needs up to {} tokens but chunked prefill is off and a step "
                        "computes at most max_num_batched_tokens = {}",
                        max_num_tokens, config_.max_num_batched_tokens)};
  }
  return {};
}

void Scheduler::add(Sequence* seq) {
  INFLIGHT_CHECK(seq->status == SequenceStatus::kWaiting && seq->block_table.empty() &&
                     seq->num_computed_tokens == 0 && seq->num_tokens() > 0,
                 "sequence {} added in a non-initial state", seq->id);
  waiting_.insert(seq);
}

int32_t Scheduler::chunk(int32_t num_left, int32_t budget) const {
  int32_t n = std::min(num_left, budget);
  if (config_.long_prefill_token_threshold > 0) {
    n = std::min(n, config_.long_prefill_token_threshold);
  }
  return n;
}

int32_t Scheduler::fit_prompt_rows(const Sequence& seq, int32_t num_new, ScheduledSequence& s) {
  const int32_t begin = seq.num_computed_tokens;
  int32_t rows = seq.prompt_logprob_rows(begin, begin + num_new);
  if (rows == 0) return num_new;
  const int32_t room = kMaxPromptLogprobRows - prompt_rows_;
  if (rows > room) {
    // The rows are the positions from max(begin, done) on: keep `room` of them.
    num_new = std::max(begin, seq.num_prompt_logprobs) - begin + room;
    rows = room;
  }
  s.prompt_rows = rows;
  prompt_rows_ += rows;
  return num_new;
}

int64_t Scheduler::expected_blocks(const Sequence& seq) const {
  const auto growth =
      static_cast<int64_t>(std::ceil(growth_ratio_ * growth_room(seq, seq.num_tokens())));
  // Before its fork a sequence's full blocks are shared by its choices; each grows on its own
  // from the partial last block (with one choice: blocks_for(num_tokens + growth)).
  const int32_t full = seq.num_tokens() / kv_.block_size();
  return full + int64_t{seq.num_choices} *
                    kv_.blocks_for(seq.num_tokens() - full * kv_.block_size() + growth);
}

int64_t Scheduler::expected_growth_blocks() const {
  int64_t blocks = 0;
  for (const Sequence* seq : running_) {
    blocks +=
        std::max<int64_t>(0, expected_blocks(*seq) - static_cast<int64_t>(seq->block_table.size()));
  }
  return blocks;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  prompt_rows_ = 0;
  // Before any request finished there is no measured share: the estimate holds.
  const double least = used_share_ < 0 ? growth_ratio_
                                       : std::clamp(used_share_ * config_.schedule_conservativeness,
                                                    min_growth_ratio_, max_growth_ratio_);
  growth_ratio_ = std::max(least, growth_ratio_ - growth_ratio_decay_);
  int32_t budget = config_.max_num_batched_tokens;
  const size_t max_seqs = max_seqs_per_step();
  const bool waits_for_victim = schedule_running(out, budget, max_seqs);
  if (out.preempted.empty() && !waits_for_victim) schedule_waiting(out, budget, max_seqs);
  out.num_batched_tokens = config_.max_num_batched_tokens - budget;
  for (const ScheduledSequence& s : out.scheduled) s.seq->in_flight = true;
  return out;
}

size_t Scheduler::max_seqs_per_step() const {
  const auto d = static_cast<size_t>(std::max(config_.max_num_micro_batches, 1));
  if (d == 1) return std::numeric_limits<size_t>::max();
  const size_t n =
      std::min(static_cast<size_t>(config_.max_num_seqs), running_.size() + waiting_.size());
  return std::max<size_t>(1, (n + d - 1) / d);
}

bool Scheduler::schedule_running(SchedulerOutput& out, int32_t& budget, size_t max_seqs) {
  // NOTE: running_ is sorted and victims are always taken from its back, at or after index i,
  // so nothing already scheduled in this step is ever preempted.
  for (size_t i = 0; i < running_.size() && budget > 0 && out.scheduled.size() < max_seqs;) {
    Sequence& seq = *running_[i];
    if (seq.in_flight) {  // its next input comes with its step's tokens
      ++i;
      continue;
    }
    ScheduledSequence s{&seq};
    const int32_t num_new =
        fit_prompt_rows(seq, chunk(seq.num_tokens() - seq.num_computed_tokens, budget), s);
    if (num_new == 0) {  // its prompt logprob rows wait for a step with room
      ++i;
      continue;
    }
    bool preempted_self = false;
    while (!kv_.allocate(seq, seq.num_computed_tokens + num_new)) {
      Sequence& victim = *running_.back();
      if (victim.in_flight) {  // its step still writes its blocks: seq waits for it
        prompt_rows_ -= s.prompt_rows;
        return true;
      }
      preempt(victim, out);
      if (&victim == &seq) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) {  // seq was the last running sequence
      prompt_rows_ -= s.prompt_rows;
      break;
    }
    s.num_new_tokens = num_new;
    s.sample = seq.num_computed_tokens + num_new == seq.num_tokens();
    out.scheduled.push_back(s);
    budget -= num_new;
    ++i;
  }
  return false;
}

void Scheduler::schedule_waiting(SchedulerOutput& out, int32_t& budget, size_t max_seqs) {
  // Blocks free beyond the running sequences' expected growth; may be negative.
  const bool reserve = max_growth_ratio_ > 0;
  int64_t headroom = reserve ? kv_.num_free_blocks() - expected_growth_blocks() : 0;
  while (!waiting_.empty() && budget > 0 && out.scheduled.size() < max_seqs) {
    Sequence& seq = **waiting_.begin();
    if (num_seats_ + seq.num_choices > config_.max_num_seqs) break;
    // A prompt whose logprobs are wanted is computed in full: every position needs its row.
    const std::vector<int32_t> cached =
        seq.wants_prompt_logprobs ? std::vector<int32_t>() : kv_.find_cached_prefix(seq);
    const int32_t num_cached = static_cast<int32_t>(cached.size()) * kv_.block_size();
    const int32_t num_left = seq.num_tokens() - num_cached;
    if (!config_.enable_chunked_prefill && num_left > budget) break;
    const int64_t need = reserve ? expected_blocks(seq) - static_cast<int64_t>(cached.size()) : 0;
    if (need > headroom && !running_.empty()) break;
    ScheduledSequence s{&seq};
    const int32_t num_new = fit_prompt_rows(seq, chunk(num_left, budget), s);
    if (num_new == 0 || !kv_.allocate(seq, num_cached + num_new, cached)) {
      prompt_rows_ -= s.prompt_rows;
      break;
    }
    // waiting -> running
    waiting_.erase(waiting_.begin());
    seq.status = SequenceStatus::kRunning;
    seq.num_computed_tokens = num_cached;
    if (seq.num_cached_prompt_tokens < 0) {
      seq.num_cached_prompt_tokens = std::min(num_cached, seq.num_prompt_tokens);
    }
    if (kv_.prefix_caching()) {
      num_prefix_queries_ += static_cast<uint64_t>(seq.num_tokens());
      num_prefix_hits_ += static_cast<uint64_t>(num_cached);
    }
    insert_running(&seq);
    headroom -= need;
    s.num_new_tokens = num_new;
    s.sample = num_cached + num_new == seq.num_tokens();
    out.scheduled.push_back(s);
    budget -= num_new;
  }
}

void Scheduler::preempt(Sequence& seq, SchedulerOutput& out) {
  // running -> waiting: blocks freed, every token kept for recomputation
  INFLIGHT_CHECK(!seq.in_flight, "preempting sequence {} while a step computes it", seq.id);
  auto it = std::find(running_.begin(), running_.end(), &seq);
  INFLIGHT_CHECK(it != running_.end(), "preempting sequence {} that is not running", seq.id);
  running_.erase(it);
  num_seats_ -= seq.num_choices;
  kv_.free(seq);
  seq.num_computed_tokens = 0;
  seq.status = SequenceStatus::kWaiting;
  ++seq.num_preemptions;
  ++num_preemptions_;
  growth_ratio_ = max_growth_ratio_;  // admission underestimated what the running ones needed
  waiting_.insert(&seq);
  out.preempted.push_back(&seq);
}

void Scheduler::insert_running(Sequence* seq) {
  running_.insert(std::upper_bound(running_.begin(), running_.end(), seq, Before{}), seq);
  num_seats_ += seq->num_choices;
}

void Scheduler::end_flight(Sequence& seq) {
  seq.in_flight = false;
  auto it = std::find(finishing_.begin(), finishing_.end(), &seq);
  if (it == finishing_.end()) return;
  finishing_.erase(it);
  kv_.free(seq);  // finished while in flight: its blocks were kept until now
}

void Scheduler::drop_step(const SchedulerOutput& out) {
  for (const ScheduledSequence& s : out.scheduled) end_flight(*s.seq);
}

void Scheduler::finish_step(const SchedulerOutput& out) {
  for (const ScheduledSequence& s : out.scheduled) {
    Sequence& seq = *s.seq;
    end_flight(seq);
    if (seq.status != SequenceStatus::kRunning) continue;  // finished meanwhile (cancelled)
    if (s.prompt_rows > 0) {  // the rows were positions max(begin, done) on
      seq.num_prompt_logprobs =
          std::max(seq.num_prompt_logprobs, seq.num_computed_tokens) + s.prompt_rows;
    }
    seq.num_computed_tokens += s.num_new_tokens;
    INFLIGHT_CHECK(seq.num_computed_tokens <= seq.num_tokens(),
                   "sequence {} computed {} of {} tokens", seq.id, seq.num_computed_tokens,
                   seq.num_tokens());
    kv_.cache_full_blocks(seq);
  }
}

void Scheduler::fork(Sequence& parent, std::span<Sequence* const> children) {
  INFLIGHT_CHECK(parent.status == SequenceStatus::kRunning && parent.is_prefill_done(),
                 "fork of sequence {} before its prompt is computed", parent.id);
  INFLIGHT_CHECK(parent.num_choices == static_cast<int32_t>(children.size()) + 1,
                 "sequence {} reserved {} seats but forks into {}", parent.id, parent.num_choices,
                 children.size() + 1);
  // Full prompt blocks are shared; the partial last one would be written by every child, so
  // each child recomputes those few tokens into a block of its own.
  const int32_t num_shared = parent.num_prompt_tokens / kv_.block_size();
  num_seats_ -= parent.num_choices;
  parent.num_choices = 1;
  num_seats_ += 1;
  for (Sequence* child : children) {
    INFLIGHT_CHECK(child->status == SequenceStatus::kWaiting && child->block_table.empty() &&
                       child->num_prompt_tokens == parent.num_prompt_tokens &&
                       child->num_tokens() > child->num_prompt_tokens,
                   "fork child {} of sequence {} is not freshly built", child->id, parent.id);
    kv_.share(parent, *child, num_shared);
    child->num_choices = 1;
    child->num_computed_tokens = num_shared * kv_.block_size();
    child->num_cached_prompt_tokens = parent.num_cached_prompt_tokens;
    child->status = SequenceStatus::kRunning;  // waiting to be born -> running
    insert_running(child);
  }
}

void Scheduler::finish(Sequence& seq) {
  if (seq.status == SequenceStatus::kRunning) {
    // The share of its growth room it used, for admission's estimate.
    if (const int32_t room = growth_room(seq, seq.num_prompt_tokens); room > 0) {
      const double share = std::min(1.0, static_cast<double>(seq.num_output_tokens()) / room);
      used_share_ =
          used_share_ < 0 ? share : used_share_ + (share - used_share_) / kUsedShareWindow;
    }
    auto it = std::find(running_.begin(), running_.end(), &seq);
    INFLIGHT_CHECK(it != running_.end(), "running sequence {} missing from the queue", seq.id);
    running_.erase(it);
    num_seats_ -= seq.num_choices;
    if (seq.in_flight) {
      finishing_.push_back(&seq);  // freed when its step is over
    } else {
      kv_.free(seq);
    }
  } else if (seq.status == SequenceStatus::kWaiting) {
    waiting_.erase(&seq);  // a fork child never added is not there: erase is then a no-op
  }
  seq.status = SequenceStatus::kFinished;
}

void Scheduler::check_integrity() const {
  kv_.check_integrity();
  INFLIGHT_CHECK(std::is_sorted(running_.begin(), running_.end(), Before{}),
                 "running queue out of order");
  std::vector<int32_t> refs(static_cast<size_t>(kv_.num_blocks()), 0);
  int32_t seats = 0;
  for (const Sequence* seq : running_) {
    INFLIGHT_CHECK(seq->status == SequenceStatus::kRunning,
                   "sequence {} in running queue is not "
                   "running",
                   seq->id);
    INFLIGHT_CHECK(!waiting_.contains(const_cast<Sequence*>(seq)),
                   "sequence {} both running and waiting", seq->id);
    INFLIGHT_CHECK(seq->num_computed_tokens >= 0 && seq->num_computed_tokens <= seq->num_tokens(),
                   "sequence {} computed {} of {} tokens", seq->id, seq->num_computed_tokens,
                   seq->num_tokens());
    INFLIGHT_CHECK(
        static_cast<int64_t>(seq->block_table.size()) >= kv_.blocks_for(seq->num_computed_tokens),
        "sequence {} holds {} blocks for {} computed tokens", seq->id, seq->block_table.size(),
        seq->num_computed_tokens);
    INFLIGHT_CHECK(seq->num_tokens() <= seq->max_num_tokens || seq->max_num_tokens == 0,
                   "sequence {} holds {} tokens, over its limit {}", seq->id, seq->num_tokens(),
                   seq->max_num_tokens);
    for (int32_t b : seq->block_table) {
      INFLIGHT_CHECK(b >= 0 && b < kv_.num_blocks(), "sequence {} holds bad block {}", seq->id, b);
      ++refs[static_cast<size_t>(b)];
    }
    seats += seq->num_choices;
  }
  INFLIGHT_CHECK(seats == num_seats_, "{} seats in use, counter says {}", seats, num_seats_);
  INFLIGHT_CHECK(num_seats_ <= config_.max_num_seqs, "{} seats over max_num_seqs {}", num_seats_,
                 config_.max_num_seqs);
  for (const Sequence* seq : waiting_) {
    INFLIGHT_CHECK(seq->status == SequenceStatus::kWaiting && seq->block_table.empty() &&
                       seq->num_computed_tokens == 0 && !seq->in_flight,
                   "waiting sequence {} holds KV state or is in flight", seq->id);
  }
  for (const Sequence* seq : finishing_) {
    INFLIGHT_CHECK(seq->status == SequenceStatus::kFinished && seq->in_flight,
                   "sequence {} kept its blocks for a step that is over", seq->id);
    for (int32_t b : seq->block_table) {
      INFLIGHT_CHECK(b >= 0 && b < kv_.num_blocks(), "sequence {} holds bad block {}", seq->id, b);
      ++refs[static_cast<size_t>(b)];
    }
  }
  for (size_t b = 0; b < refs.size(); ++b) {
    const int32_t rc = kv_.pool().ref_count(static_cast<int32_t>(b));
    INFLIGHT_CHECK(rc == refs[b],
                   "block {} has ref_count {} but {} running or finishing sequences hold it", b, rc,
                   refs[b]);
  }
}

}  // namespace inflight
