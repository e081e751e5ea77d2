#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>
#include <random>

namespace inflight {
namespace {

// Most tests pin the base rule (budgets, seats, chunks, preemption) under optimistic admission
// (schedule_conservativeness 0); the growth reservation has its own tests at the end.
EngineConfig make_config(int32_t budget, int32_t max_seqs, double conservativeness = 0) {
  EngineConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.max_model_len = 4096;
  c.schedule_conservativeness = conservativeness;
  return c;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void init(const EngineConfig& config, int64_t num_blocks, int32_t block_size,
            bool prefix_caching = true) {
    kv_ = std::make_unique<KvBlockManager>(num_blocks, block_size, prefix_caching);
    sched_ = std::make_unique<Scheduler>(config, *kv_);
  }

  // Distinct prompts unless first_token is given (equal prompts share cached blocks).
  Sequence* make(int32_t prompt_len, int32_t priority = 0, int32_t first_token = -1, int32_t n = 1,
                 int32_t max_tokens = 4096 - 64) {
    if (first_token < 0) first_token = static_cast<int32_t>(next_id_) * 1000;
    auto s = std::make_unique<Sequence>();
    s->id = next_id_++;
    s->request_id = static_cast<RequestId>(s->id);
    s->arrival = static_cast<uint64_t>(s->id);
    s->priority = priority;
    s->num_choices = n;
    s->token_ids.resize(static_cast<size_t>(prompt_len));
    std::iota(s->token_ids.begin(), s->token_ids.end(), first_token);
    s->num_prompt_tokens = prompt_len;
    s->max_num_tokens = prompt_len + max_tokens;
    seqs_.push_back(std::move(s));
    return seqs_.back().get();
  }

  Sequence* add(int32_t prompt_len, int32_t priority = 0, int32_t first_token = -1) {
    Sequence* s = make(prompt_len, priority, first_token);
    sched_->add(s);
    return s;
  }

  // Runs `count` requests of `prompt_len` + exactly `max_tokens` generated (as with ignore_eos)
  // to the end; returns the preemptions it took. check: check_integrity() after every step.
  uint64_t run_fixed_length(int count, int32_t prompt_len, int32_t max_tokens, bool check = true) {
    std::vector<Sequence*> live;
    for (int i = 0; i < count; ++i) {
      live.push_back(make(prompt_len, 0, -1, 1, max_tokens));
      sched_->add(live.back());
    }
    for (int guard = 0; !live.empty(); ++guard) {
      EXPECT_LT(guard, 100000) << "no progress";
      if (guard >= 100000) break;
      step(check);
      std::erase_if(live, [&](Sequence* s) {
        if (s->num_tokens() < s->max_num_tokens) return false;
        sched_->finish(*s);
        return true;
      });
    }
    return sched_->num_preemptions();
  }

  // One step: schedule, "run", append a token to every sequence that samples.
  SchedulerOutput step(bool check = true) {
    SchedulerOutput out = sched_->schedule();
    sched_->finish_step(out);
    for (const auto& s : out.scheduled) {
      if (s.sample) s.seq->token_ids.push_back(7);
    }
    if (check) sched_->check_integrity();
    return out;
  }

  static int32_t new_tokens_of(const SchedulerOutput& out, const Sequence* seq) {
    for (const auto& s : out.scheduled) {
      if (s.seq == seq) return s.num_new_tokens;
    }
    return 0;
  }

  std::unique_ptr<KvBlockManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  int64_t next_id_ = 1;
};

TEST_F(SchedulerTest, LongPromptIsChunkedUnderTheTokenBudget) {
  init(make_config(8, 4), 16, 4);
  Sequence* a = add(20);
  auto out = step();
  EXPECT_EQ(new_tokens_of(out, a), 8);
  EXPECT_FALSE(out.scheduled[0].sample);
  EXPECT_EQ(a->num_computed_tokens, 8);
  out = step();
  EXPECT_EQ(new_tokens_of(out, a), 8);
  out = step();
  EXPECT_EQ(new_tokens_of(out, a), 4);
  EXPECT_TRUE(out.scheduled[0].sample);
  EXPECT_EQ(a->num_tokens(), 21);
  out = step();  // decode
  EXPECT_EQ(new_tokens_of(out, a), 1);
  EXPECT_EQ(a->num_computed_tokens, 21);
}

TEST_F(SchedulerTest, RunningSequencesGoFirstAndNewOnesTakeTheRest) {
  init(make_config(10, 4), 32, 4);
  Sequence* a = add(3);
  step();  // a prefilled, now decoding
  Sequence* b = add(30);
  auto out = step();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].seq, a);
  EXPECT_EQ(new_tokens_of(out, a), 1);
  EXPECT_EQ(new_tokens_of(out, b), 9);
  EXPECT_EQ(out.num_batched_tokens, 10);
}

TEST_F(SchedulerTest, LongPrefillThresholdCapsOneSequencePerStep) {
  EngineConfig c = make_config(64, 4);
  c.long_prefill_token_threshold = 5;
  init(c, 32, 4);
  Sequence* a = add(12);
  Sequence* b = add(3);
  const auto out = step();
  EXPECT_EQ(new_tokens_of(out, a), 5);
  EXPECT_EQ(new_tokens_of(out, b), 3);
}

TEST_F(SchedulerTest, WithoutChunkingAPromptWaitsForAWholeBudget) {
  EngineConfig c = make_config(10, 4);
  c.enable_chunked_prefill = false;
  init(c, 32, 4);
  EXPECT_EQ(sched_->check_fits(11, 1).code(), StatusCode::kResourceExhausted);
  Sequence* a = add(6);
  Sequence* b = add(6);
  auto out = step();
  EXPECT_EQ(new_tokens_of(out, a), 6);
  EXPECT_EQ(new_tokens_of(out, b), 0) << "b does not fit in the 4 tokens left";
  out = step();
  EXPECT_EQ(new_tokens_of(out, a), 1);
  EXPECT_EQ(new_tokens_of(out, b), 6);
}

TEST_F(SchedulerTest, MaxNumSeqsCapsTheRunningSet) {
  init(make_config(100, 2), 32, 4);
  Sequence* a = add(2);
  Sequence* b = add(2);
  Sequence* c = add(2);
  step();
  EXPECT_EQ(sched_->num_running(), 2);
  EXPECT_EQ(c->status, SequenceStatus::kWaiting);
  sched_->finish(*a);
  const auto out = step();
  EXPECT_EQ(new_tokens_of(out, b), 1);
  EXPECT_EQ(new_tokens_of(out, c), 2);
}

TEST_F(SchedulerTest, WaitingOrderIsPriorityThenArrival) {
  init(make_config(100, 1), 32, 4);
  Sequence* late_urgent = nullptr;
  Sequence* a = add(2, /*priority=*/5);
  Sequence* b = add(2, /*priority=*/1);
  late_urgent = add(2, /*priority=*/-3);
  auto out = step();
  EXPECT_EQ(out.scheduled[0].seq, late_urgent);
  sched_->finish(*late_urgent);
  out = step();
  EXPECT_EQ(out.scheduled[0].seq, b);
  sched_->finish(*b);
  out = step();
  EXPECT_EQ(out.scheduled[0].seq, a);
}

TEST_F(SchedulerTest, OutOfBlocksPreemptsTheLatestAndRecomputesItLater) {
  // 4 blocks of 2 tokens; no prefix cache, so a preempted sequence recomputes everything.
  init(make_config(100, 4), 4, 2, /*prefix_caching=*/false);
  Sequence* a = add(3);
  Sequence* b = add(3);
  step();  // both prefilled: 3 of 4 tokens computed, 2 blocks each, pool empty
  step();  // 4 of 5 computed, still 2 blocks each
  EXPECT_EQ(kv_->num_free_blocks(), 0);
  const auto b_tokens = b->token_ids;
  auto out = step();  // a needs a 3rd block for its 5th token: b is preempted
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], b);
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_EQ(b->token_ids, b_tokens) << "preemption keeps every token";
  EXPECT_EQ(b->num_preemptions, 1);
  EXPECT_EQ(new_tokens_of(out, a), 1);
  EXPECT_EQ(sched_->num_preemptions(), 1u);
  sched_->finish(*a);
  out = step();
  EXPECT_EQ(new_tokens_of(out, b), 5) << "b recomputes its prompt and its generated tokens";
  EXPECT_TRUE(out.scheduled[0].sample);
}

TEST_F(SchedulerTest, LowerPriorityIsPreemptedEvenIfItArrivedFirst) {
  init(make_config(100, 4), 4, 2);
  Sequence* background = add(3, /*priority=*/10);
  Sequence* urgent = add(3, /*priority=*/0);
  step();
  step();
  const auto out = step();
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], background);
  EXPECT_EQ(new_tokens_of(out, urgent), 1);
}

TEST_F(SchedulerTest, ASequenceThatCannotGrowPreemptsItselfWhenItIsTheLatest) {
  init(make_config(100, 4), 4, 2);
  Sequence* a = add(3);  // 2 blocks; after sampling 4 tokens: still 2 blocks
  Sequence* b = add(4);  // 2 blocks; after sampling 5 tokens: needs a 3rd
  step();
  auto out = step();
  EXPECT_EQ(out.preempted, std::vector<Sequence*>{b});
  EXPECT_EQ(new_tokens_of(out, a), 1);
  EXPECT_EQ(new_tokens_of(out, b), 0);
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  EXPECT_EQ(kv_->num_free_blocks(), 2);
  // b needs 3 blocks to recompute its 5 tokens; only 2 are free while a runs.
  out = step();
  EXPECT_EQ(new_tokens_of(out, b), 0);
  sched_->finish(*a);
  out = step();
  // a's growth evicted b's second block, but its first is still cached.
  EXPECT_EQ(new_tokens_of(out, b), 3);
  EXPECT_EQ(b->num_computed_tokens, 5);
}

TEST_F(SchedulerTest, PrefixHitStartsAboveZero) {
  init(make_config(100, 4), 16, 4);
  Sequence* a = add(10, 0, 100);
  step();
  Sequence* b = add(10, 0, 100);  // same prompt
  const auto out = step();
  EXPECT_EQ(new_tokens_of(out, b), 2) << "two full blocks (8 tokens) come from the cache";
  EXPECT_EQ(b->num_cached_prompt_tokens, 8);
  EXPECT_EQ(b->block_table[0], a->block_table[0]);
  EXPECT_EQ(b->block_table[1], a->block_table[1]);
  EXPECT_EQ(sched_->num_prefix_queries(), 20u);
  EXPECT_EQ(sched_->num_prefix_hits(), 8u);
}

TEST_F(SchedulerTest, CheckFitsNamesTheLimit) {
  EngineConfig c = make_config(100, 3);
  c.max_model_len = 50;
  init(c, 4, 8);  // 32 tokens of KV
  EXPECT_TRUE(sched_->check_fits(32, 1).ok());
  const Status too_long = sched_->check_fits(51, 1);
  EXPECT_EQ(too_long.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_long.message().find("max_model_len"), std::string::npos);
  const Status too_big = sched_->check_fits(33, 1);
  EXPECT_EQ(too_big.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.message().find("KV cache"), std::string::npos);
  EXPECT_EQ(sched_->check_fits(10, 4).code(), StatusCode::kResourceExhausted);
}

TEST_F(SchedulerTest, ForkSharesFullPromptBlocksAndRecomputesTheTail) {
  init(make_config(100, 4), 16, 4);
  Sequence* parent = make(10, 0, 0, /*n=*/3);
  sched_->add(parent);
  auto out = sched_->schedule();
  sched_->finish_step(out);
  ASSERT_TRUE(out.scheduled[0].sample);
  std::vector<Sequence*> children;
  for (int c = 1; c < 3; ++c) {
    Sequence* child = make(10, 0, 0);
    child->token_ids.push_back(40 + c);
    child->arrival = parent->arrival;
    child->choice = c;
    children.push_back(child);
  }
  parent->token_ids.push_back(40);
  sched_->fork(*parent, children);
  sched_->check_integrity();
  for (Sequence* child : children) {
    EXPECT_EQ(child->num_computed_tokens, 8);
    EXPECT_EQ(child->block_table[0], parent->block_table[0]);
    EXPECT_EQ(child->block_table[1], parent->block_table[1]);
  }
  EXPECT_EQ(kv_->pool().ref_count(parent->block_table[0]), 3);
  EXPECT_EQ(kv_->pool().ref_count(parent->block_table[2]), 1);
  out = step();
  EXPECT_EQ(new_tokens_of(out, parent), 1);
  for (Sequence* child : children) {
    EXPECT_EQ(new_tokens_of(out, child), 3) << "2 prompt tokens of the partial block + 1";
    EXPECT_NE(child->block_table[2], parent->block_table[2]);
  }
  for (auto& s : seqs_) sched_->finish(*s);
  EXPECT_EQ(kv_->num_free_blocks(), 16);
  sched_->check_integrity();
}

TEST_F(SchedulerTest, FinishFreesBlocksAtOnce) {
  init(make_config(100, 4), 8, 4);
  Sequence* a = add(9);
  Sequence* b = add(2);
  step();
  EXPECT_EQ(kv_->num_free_blocks(), 8 - 3 - 1);
  sched_->finish(*a);
  EXPECT_EQ(kv_->num_free_blocks(), 7);
  EXPECT_EQ(a->status, SequenceStatus::kFinished);
  sched_->finish(*a);  // idempotent
  sched_->check_integrity();
  Sequence* waiting = add(3);
  sched_->finish(*waiting);
  EXPECT_EQ(sched_->num_waiting(), 0);
  sched_->finish(*b);
  EXPECT_FALSE(sched_->has_unfinished());
  EXPECT_EQ(kv_->num_free_blocks(), 8);
}

TEST_F(SchedulerTest, AdmissionKeepsRoomForTheRunningSequencesExpectedGrowth) {
  // 16 blocks of 4. Each request: 8 prompt tokens + up to 40 more; before any request finished
  // the estimate expects all of them: 8 + 40 = 48 tokens = 12 blocks.
  init(make_config(100, 8, /*conservativeness=*/1), 16, 4);
  for (int i = 0; i < 100; ++i) sched_->schedule();  // no request finished: the estimate holds
  EXPECT_DOUBLE_EQ(sched_->growth_ratio(), 1);
  Sequence* a = make(8, 0, -1, 1, 40);
  Sequence* b = make(8, 0, -1, 1, 40);
  sched_->add(a);
  sched_->add(b);
  auto out = step();
  // a holds 2 blocks and expects 10 more: 4 free beyond that, fewer than b's 12.
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].seq, a);
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  sched_->finish(*a);
  out = step();
  EXPECT_EQ(new_tokens_of(out, b), 8);  // alone: admitted
}

TEST_F(SchedulerTest, OptimisticAdmissionTakesWhatIsFree) {
  init(make_config(100, 8, /*conservativeness=*/0), 16, 4);
  EXPECT_DOUBLE_EQ(sched_->growth_ratio(), 0);
  Sequence* a = make(8, 0, -1, 1, 40);
  Sequence* b = make(8, 0, -1, 1, 40);
  sched_->add(a);
  sched_->add(b);
  auto out = step();
  EXPECT_EQ(out.scheduled.size(), 2u);
}

TEST_F(SchedulerTest, TheGrowthEstimateDecaysToTheShareFinishedRequestsUsed) {
  init(make_config(100, 8, /*conservativeness=*/1), 64, 4);
  // Requests that used a quarter of their max_tokens: the estimate decays to 0.25.
  for (int i = 0; i < 8; ++i) {
    Sequence* s = make(8, 0, -1, 1, 40);
    sched_->add(s);
    step();
    for (int k = 0; k < 9; ++k) s->token_ids.push_back(7);  // 10 of 40 with the step's
    sched_->finish(*s);
  }
  for (int i = 0; i < 700; ++i) sched_->schedule();
  EXPECT_NEAR(sched_->growth_ratio(), 0.25, 1e-9);
  // Ones that stopped at once: towards the least, 0.1, as the average moves.
  for (int i = 0; i < 200; ++i) {
    Sequence* s = make(8, 0, -1, 1, 40);
    sched_->add(s);
    step();
    sched_->finish(*s);
  }
  for (int i = 0; i < 700; ++i) sched_->schedule();
  EXPECT_NEAR(sched_->growth_ratio(), 0.1, 1e-9);
  // Two requests that each outgrow half the cache: the second is admitted on the low
  // estimate, then one of them must be preempted, which raises it to 1.
  EXPECT_GT(run_fixed_length(2, 8, 128), 0u);
  EXPECT_GT(sched_->growth_ratio(), 0.6);
}

TEST_F(SchedulerTest, LongFixedLengthGenerationsRunWithoutPreemption) {
  // Offline 1000/1000 as on one H100 with Llama-3.1-8B FP8 and an FP8 cache: 2,048 requests of
  // 1,000 + exactly 1,000 tokens, 60,661 blocks of 16 (485 such requests at their full length),
  // 8,192 tokens and 1,024 sequences a step. Each finished request used all its max_tokens, so
  // the estimate stays at 1: no admitted request is ever evicted (a decay to a fixed 10%
  // preempted 253 of them here, and on the GPU).
  init(make_config(8192, 1024, /*conservativeness=*/1), 60661, 16);
  EXPECT_EQ(run_fixed_length(2048, 1000, 1000, /*check=*/false), 0u);
  EXPECT_DOUBLE_EQ(sched_->growth_ratio(), 1);
}

TEST_F(SchedulerTest, FixedLengthGenerationsPreemptLessWithTheGrowthReservation) {
  // 32 blocks of 4 = 128 tokens; 12 requests of 8 + 32 tokens (10 blocks each at the end):
  // at most 3 fit at once. Optimistic admission starts 12 and preempts over and over;
  // the reservation admits about as many as will fit.
  init(make_config(100, 16, /*conservativeness=*/0), 32, 4);
  const uint64_t optimistic = run_fixed_length(12, 8, 32);
  seqs_.clear();
  init(make_config(100, 16, /*conservativeness=*/1), 32, 4);
  const uint64_t reserved = run_fixed_length(12, 8, 32);
  EXPECT_GT(optimistic, 12u);
  EXPECT_LT(reserved * 4, optimistic) << "optimistic " << optimistic << ", reserved " << reserved;
}

// Micro-batches (max_num_micro_batches = 2): a step in flight keeps its sequences, the next
// step takes the others, and neither takes more than half of the sequences there are.
TEST_F(SchedulerTest, MicroBatchesInFlightTakeDisjointSequences) {
  EngineConfig config = make_config(100, 8);
  config.max_num_micro_batches = 2;
  init(config, 64, 4);
  for (int i = 0; i < 4; ++i) add(3);
  const SchedulerOutput first = sched_->schedule();
  const SchedulerOutput second = sched_->schedule();
  ASSERT_EQ(first.scheduled.size(), 2u);
  ASSERT_EQ(second.scheduled.size(), 2u);
  for (const ScheduledSequence& s : first.scheduled) {
    EXPECT_TRUE(s.seq->in_flight);
    EXPECT_EQ(new_tokens_of(second, s.seq), 0) << "sequence " << s.seq->id << " scheduled twice";
  }
  EXPECT_TRUE(sched_->schedule().empty()) << "every sequence is in flight";
  sched_->check_integrity();
  // The first step's tokens return: its sequences decode next, the second's are still out.
  sched_->finish_step(first);
  for (const ScheduledSequence& s : first.scheduled) s.seq->token_ids.push_back(7);
  const SchedulerOutput third = sched_->schedule();
  ASSERT_EQ(third.scheduled.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(third.scheduled[i].seq, first.scheduled[i].seq);
    EXPECT_EQ(third.scheduled[i].num_new_tokens, 1);
  }
  sched_->check_integrity();
}

TEST_F(SchedulerTest, ASequenceInFlightIsNeverPreemptedItsPreemptorWaits) {
  // 4 blocks of 2 tokens: a (4 prompt tokens) and b (3) take 2 blocks each.
  EngineConfig config = make_config(100, 4);
  config.max_num_micro_batches = 2;
  init(config, 4, 2, /*prefix_caching=*/false);
  Sequence* a = add(4);
  Sequence* b = add(3);
  const SchedulerOutput first = sched_->schedule();   // a (one of the two sequences)
  const SchedulerOutput second = sched_->schedule();  // b
  ASSERT_EQ(new_tokens_of(first, a), 4);
  ASSERT_EQ(new_tokens_of(second, b), 3);
  EXPECT_EQ(kv_->num_free_blocks(), 0);
  sched_->finish_step(first);
  a->token_ids.push_back(7);
  // a needs a 3rd block for its 5th token; the victim, b, is in flight: a waits for b's step.
  SchedulerOutput out = sched_->schedule();
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(out.preempted.empty());
  EXPECT_EQ(b->status, SequenceStatus::kRunning);
  EXPECT_EQ(sched_->num_preemptions(), 0u);
  sched_->check_integrity();
  sched_->finish_step(second);
  b->token_ids.push_back(7);
  out = sched_->schedule();  // b's step is over: the rule applies
  EXPECT_EQ(out.preempted, std::vector<Sequence*>{b});
  EXPECT_EQ(new_tokens_of(out, a), 1);
  EXPECT_EQ(b->num_computed_tokens, 0);
  sched_->check_integrity();
}

TEST_F(SchedulerTest, ASequenceFinishedInFlightKeepsItsBlocksUntilItsStepIsOver) {
  EngineConfig config = make_config(100, 4);
  config.max_num_micro_batches = 2;
  init(config, 8, 4);
  Sequence* a = add(9);  // 3 blocks
  const SchedulerOutput out = sched_->schedule();
  ASSERT_EQ(new_tokens_of(out, a), 9);
  sched_->finish(*a);  // cancelled while its step runs
  EXPECT_EQ(a->status, SequenceStatus::kFinished);
  EXPECT_FALSE(sched_->has_unfinished());
  EXPECT_EQ(kv_->num_free_blocks(), 5) << "a step in flight still writes them";
  sched_->check_integrity();
  sched_->finish_step(out);
  EXPECT_EQ(kv_->num_free_blocks(), 8);
  EXPECT_FALSE(a->in_flight);
  sched_->check_integrity();
  // A step that produced nothing (failed) frees them the same way.
  Sequence* b = add(5);
  const SchedulerOutput failed = sched_->schedule();
  sched_->finish(*b);
  EXPECT_EQ(kv_->num_free_blocks(), 6);
  sched_->drop_step(failed);
  EXPECT_EQ(kv_->num_free_blocks(), 8);
  sched_->check_integrity();
}

}  // namespace
}  // namespace inflight
