// Randomized simulation of the scheduler with a simulated KV cache.
//
// Thousands of requests with random prompt lengths (many sharing prefixes), outputs, choices,
// priorities, arrivals and cancellations run through a small KV pool. Each step builds the real
// ForwardBatch and plays it against a simulated cache in which every slot holds the hash of
// the token prefix it encodes: a step must find the right prefix in every slot of its context
// (block tables, prefix hits, forks and recomputation after preemption all have to be right)
// and may write only to blocks nobody else holds. check_integrity() runs after every step; at
// the end every block must be free and every choice must hold exactly its expected tokens.
//
// With micro-batches, up to D steps are in flight (launched, results not yet applied) and
// cancellations land between launches, in flight or not: no sequence may be in two steps in
// flight or be preempted while in one, and no step may write a block that a step in flight
// uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "engine/batch_builder.h"
#include "engine/scheduler.h"

namespace inflight {
namespace {

constexpr int32_t kVocab = 50;
constexpr int32_t kEos = 0;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The token a choice generates at output index i (kEos ends it early).
int32_t token_for(RequestId r, int32_t choice, int32_t i) {
  return static_cast<int32_t>(
      mix(r * 1000003ULL + static_cast<uint64_t>(choice) * 7919ULL + static_cast<uint64_t>(i)) %
      kVocab);
}

struct SimRequest {
  RequestId id = 0;
  int32_t n = 1;
  int32_t max_tokens = 1;
  bool forked = false;
  bool cancelled = false;
  std::vector<std::unique_ptr<Sequence>> seqs;  // [0] = parent / choice 0
};

struct SimConfig {
  int32_t block_size;
  int64_t num_blocks;
  int32_t budget;
  int32_t max_seqs;
  bool chunked;
  bool prefix_caching;
  int32_t long_prefill;
  int num_requests;
  uint32_t seed;
  int32_t micro_batches;  // steps in flight at most
};

class Simulation {
 public:
  explicit Simulation(const SimConfig& c) : c_(c), rng_(c.seed) {
    EngineConfig ec;
    ec.block_size = c.block_size;
    ec.max_num_batched_tokens = c.budget;
    ec.max_num_seqs = c.max_seqs;
    ec.enable_chunked_prefill = c.chunked;
    ec.enable_prefix_caching = c.prefix_caching;
    ec.long_prefill_token_threshold = c.long_prefill;
    ec.max_num_micro_batches = c.micro_batches;
    ec.max_model_len = 200;
    kv_ = std::make_unique<KvBlockManager>(c.num_blocks, c.block_size, c.prefix_caching);
    sched_ = std::make_unique<Scheduler>(ec, *kv_);
    slots_.assign(static_cast<size_t>(c.num_blocks * c.block_size), 0);
    for (auto& base : bases_) {
      base.resize(80);
      for (auto& t : base) t = 1 + static_cast<int32_t>(rng_() % (kVocab - 1));
    }
  }

  void run() {
    int64_t steps = 0;
    const auto depth = static_cast<size_t>(c_.micro_batches);
    while (num_arrived_ < c_.num_requests || sched_->has_unfinished() || !flights_.empty()) {
      ASSERT_LT(++steps, 400000) << "no progress";
      arrive();
      bool launched = false;
      if (sched_->has_unfinished() && flights_.size() < depth) {
        launched = launch();
        if (::testing::Test::HasFailure()) return;
      }
      cancel_some();  // with steps in flight
      sched_->check_integrity();
      // The pipeline is full, or nothing more could be launched: the oldest step ends.
      if (!flights_.empty() && (flights_.size() == depth || !launched)) complete();
      if (::testing::Test::HasFailure()) return;
      sched_->check_integrity();
    }
    sched_->check_integrity();
    EXPECT_EQ(kv_->num_free_blocks(), kv_->num_blocks()) << "blocks leaked";
    EXPECT_EQ(sched_->num_running() + sched_->num_waiting(), 0);
    check_outputs();
  }

  int num_rejected = 0;
  int num_cancelled = 0;
  int num_cancelled_in_flight = 0;
  int num_overlapped = 0;  // steps launched while another was in flight

  const Scheduler& scheduler() const { return *sched_; }

 private:
  void arrive() {
    const int k = static_cast<int>(rng_() % 4);
    for (int i = 0; i < k && num_arrived_ < c_.num_requests; ++i) {
      ++num_arrived_;
      auto req = std::make_unique<SimRequest>();
      req->id = static_cast<RequestId>(num_arrived_);
      const uint32_t dice = rng_() % 10;
      req->n = dice < 7 ? 1 : static_cast<int32_t>(2 + dice % 3);
      req->n = std::min(req->n, c_.max_seqs);
      req->max_tokens = 1 + static_cast<int32_t>(rng_() % 30);
      auto seq = std::make_unique<Sequence>();
      seq->id = next_seq_id_++;
      seq->request_id = req->id;
      seq->arrival = req->id;
      seq->priority = static_cast<int32_t>(rng_() % 3);
      seq->num_choices = req->n;
      const auto& base = bases_[rng_() % bases_.size()];
      const int32_t shared = static_cast<int32_t>(rng_() % 50);
      const int32_t own = 1 + static_cast<int32_t>(rng_() % 30);
      seq->token_ids.assign(base.begin(), base.begin() + shared);
      for (int32_t j = 0; j < own; ++j) {
        seq->token_ids.push_back(1 + static_cast<int32_t>(rng_() % (kVocab - 1)));
      }
      seq->num_prompt_tokens = seq->num_tokens();
      seq->max_num_tokens = seq->num_prompt_tokens + req->max_tokens;
      const Status fits = sched_->check_fits(seq->max_num_tokens, req->n);
      const bool should_fit = kv_->blocks_for(seq->max_num_tokens) <= kv_->num_blocks() &&
                              (c_.chunked || seq->max_num_tokens <= c_.budget);
      ASSERT_EQ(fits.ok(), should_fit) << fits.to_string();
      if (!fits.ok()) {
        ++num_rejected;
        continue;
      }
      sched_->add(seq.get());
      req->seqs.push_back(std::move(seq));
      requests_.emplace(req->id, std::move(req));
    }
  }

  uint64_t prefix_hash(const Sequence& seq, int32_t pos) {
    auto& h = prefix_hashes_[seq.id];
    while (static_cast<int32_t>(h.size()) <= pos) {
      const uint64_t prev = h.empty() ? 0x1234 : h.back();
      h.push_back(mix(prev ^ static_cast<uint64_t>(seq.token_ids[h.size()])));
    }
    return h[static_cast<size_t>(pos)];
  }

  // Schedules a step and plays its reads and writes (each stage computes the steps in launch
  // order, so the cache sees them in that order); false when nothing could be scheduled.
  bool launch() {
    SchedulerOutput out = sched_->schedule();
    if (out.empty()) {
      EXPECT_FALSE(flights_.empty()) << "work is pending but nothing was scheduled";
      return false;
    }
    EXPECT_LE(out.num_batched_tokens, c_.budget);
    std::set<int32_t> used;  // blocks of the steps in flight
    for (const Flight& f : flights_) used.insert(f.blocks.begin(), f.blocks.end());
    for (const Sequence* p : out.preempted) {
      EXPECT_FALSE(in_flight(*p)) << "sequence " << p->id << " preempted while in flight";
    }
    for (const ScheduledSequence& s : out.scheduled) {
      EXPECT_FALSE(in_flight(*s.seq)) << "sequence " << s.seq->id << " in two steps in flight";
      EXPECT_TRUE(s.seq->in_flight);
    }
    if (::testing::Test::HasFailure()) return false;
    build_forward_batch(out, c_.block_size, batch_);
    batch_.validate(c_.block_size, kv_->num_blocks());
    const int32_t bs = c_.block_size;
    Flight flight;
    // Reads: every context token before this step's tokens must be in its slot.
    for (int32_t i = 0; i < batch_.num_seqs(); ++i) {
      const Sequence& seq = *out.scheduled[static_cast<size_t>(i)].seq;
      const int32_t num_new = batch_.query_start[i + 1] - batch_.query_start[i];
      const int32_t first_new = batch_.context_lens[i] - num_new;
      for (int32_t p = 0; p < first_new; ++p) {
        const int64_t block =
            batch_.block_tables[static_cast<size_t>(i * batch_.max_blocks_per_seq + p / bs)];
        const auto slot = static_cast<size_t>(block * bs + p % bs);
        EXPECT_EQ(slots_[slot], prefix_hash(seq, p))
            << "sequence " << seq.id << " reads a wrong KV at position " << p;
        if (slots_[slot] != prefix_hash(seq, p)) return false;
        flight.blocks.insert(static_cast<int32_t>(block));
      }
    }
    // Writes: only into blocks this sequence holds alone.
    for (int32_t i = 0; i < batch_.num_seqs(); ++i) {
      const Sequence& seq = *out.scheduled[static_cast<size_t>(i)].seq;
      for (int32_t j = batch_.query_start[i]; j < batch_.query_start[i + 1]; ++j) {
        const int64_t slot = batch_.slot_mapping[static_cast<size_t>(j)];
        const auto block = static_cast<int32_t>(slot / bs);
        EXPECT_EQ(kv_->pool().ref_count(block), 1)
            << "sequence " << seq.id << " writes into a shared block";
        EXPECT_FALSE(used.contains(block))
            << "sequence " << seq.id << " writes block " << block << " of a step in flight";
        if (::testing::Test::HasFailure()) return false;
        slots_[static_cast<size_t>(slot)] =
            prefix_hash(seq, batch_.positions[static_cast<size_t>(j)]);
        flight.blocks.insert(block);
      }
    }
    if (!flights_.empty()) ++num_overlapped;
    flight.out = std::move(out);
    flights_.push_back(std::move(flight));
    return true;
  }

  // The oldest step in flight ends: its tokens are sampled.
  void complete() {
    const Flight f = std::move(flights_.front());
    flights_.pop_front();
    sched_->finish_step(f.out);
    for (const ScheduledSequence& s : f.out.scheduled) {
      EXPECT_FALSE(s.seq->in_flight);
      // A sequence cancelled in flight gets nothing.
      if (s.sample && s.seq->status == SequenceStatus::kRunning) sample(*s.seq);
    }
  }

  bool in_flight(const Sequence& seq) const {
    for (const Flight& f : flights_) {
      for (const ScheduledSequence& s : f.out.scheduled) {
        if (s.seq == &seq) return true;
      }
    }
    return false;
  }

  void sample(Sequence& seq) {
    SimRequest& req = *requests_.at(seq.request_id);
    if (!req.forked && req.n > 1) {  // the prompt is done: split into the n choices
      req.forked = true;
      std::vector<Sequence*> children;
      for (int32_t c = 1; c < req.n; ++c) {
        auto child = std::make_unique<Sequence>();
        child->id = next_seq_id_++;
        child->request_id = req.id;
        child->choice = c;
        child->priority = seq.priority;
        child->arrival = seq.arrival;
        child->token_ids.assign(seq.token_ids.begin(),
                                seq.token_ids.begin() + seq.num_prompt_tokens);
        child->token_ids.push_back(token_for(req.id, c, 0));
        child->num_prompt_tokens = seq.num_prompt_tokens;
        child->max_num_tokens = seq.max_num_tokens;
        children.push_back(child.get());
        req.seqs.push_back(std::move(child));
      }
      sched_->fork(seq, children);
      for (Sequence* child : children) maybe_finish(*child);
    }
    seq.token_ids.push_back(token_for(req.id, seq.choice, seq.num_output_tokens()));
    maybe_finish(seq);
  }

  void maybe_finish(Sequence& seq) {
    const SimRequest& req = *requests_.at(seq.request_id);
    if (seq.token_ids.back() == kEos || seq.num_output_tokens() >= req.max_tokens) {
      sched_->finish(seq);
    }
  }

  void cancel_some() {
    if (requests_.empty() || rng_() % 40 != 0) return;
    std::vector<SimRequest*> live_requests;  // with a choice not finished
    for (auto& [id, r] : requests_) {
      if (std::any_of(r->seqs.begin(), r->seqs.end(),
                      [](const auto& s) { return s->status != SequenceStatus::kFinished; })) {
        live_requests.push_back(r.get());
      }
    }
    if (live_requests.empty()) return;
    SimRequest& req = *live_requests[rng_() % live_requests.size()];
    bool flying = false;
    for (auto& s : req.seqs) {
      flying |= s->in_flight;
      sched_->finish(*s);
    }
    req.cancelled = true;
    ++num_cancelled;
    num_cancelled_in_flight += flying ? 1 : 0;
  }

  void check_outputs() {
    for (const auto& [id, req] : requests_) {
      if (req->cancelled) continue;
      ASSERT_EQ(static_cast<int32_t>(req->seqs.size()), req->n) << "request " << id;
      for (const auto& s : req->seqs) {
        ASSERT_EQ(s->status, SequenceStatus::kFinished);
        const int32_t produced = s->num_output_tokens();
        ASSERT_GE(produced, 1);
        for (int32_t i = 0; i < produced; ++i) {
          const int32_t t = s->token_ids[static_cast<size_t>(s->num_prompt_tokens + i)];
          ASSERT_EQ(t, token_for(id, s->choice, i)) << "request " << id << " lost a token";
          if (i + 1 < produced) {
            ASSERT_NE(t, kEos);
          }
        }
        ASSERT_TRUE(produced == req->max_tokens || s->token_ids.back() == kEos);
      }
    }
  }

  SimConfig c_;
  std::mt19937 rng_;
  std::unique_ptr<KvBlockManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<uint64_t> slots_;  // the simulated KV cache: prefix hash per slot
  std::vector<std::vector<int32_t>> bases_ = std::vector<std::vector<int32_t>>(5);
  std::map<RequestId, std::unique_ptr<SimRequest>> requests_;
  std::map<int64_t, std::vector<uint64_t>> prefix_hashes_;
  ForwardBatch batch_;
  // A step in flight: what was scheduled and every block it reads or writes.
  struct Flight {
    SchedulerOutput out;
    std::set<int32_t> blocks;
  };
  std::deque<Flight> flights_;
  int num_arrived_ = 0;
  int64_t next_seq_id_ = 1;
};

class SchedulerSimulation : public ::testing::TestWithParam<SimConfig> {};

TEST_P(SchedulerSimulation, EveryTokenIsRightAndEveryBlockComesBack) {
  Simulation sim(GetParam());
  ASSERT_NO_FATAL_FAILURE(sim.run());
  // The scenario must really exercise what it claims to.
  const Scheduler& s = sim.scheduler();
  EXPECT_GT(sim.num_cancelled, 0);
  if (GetParam().num_blocks * GetParam().block_size < 110) {
    EXPECT_GT(sim.num_rejected, 0);
  }
  if (GetParam().num_blocks <= 40) {
    EXPECT_GT(s.num_preemptions(), 0u);
  }
  if (GetParam().prefix_caching) {
    EXPECT_GT(s.num_prefix_hits(), 0u);
  }
  if (GetParam().micro_batches > 1) {
    EXPECT_GT(sim.num_overlapped, 0);
    EXPECT_GT(sim.num_cancelled_in_flight, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, SchedulerSimulation,
                         ::testing::Values(
                             //        bs  blocks budget seqs chunked prefix long  reqs  seed  D
                             SimConfig{16, 12, 64, 16, true, true, 0, 1500, 1, 1},
                             SimConfig{1, 120, 7, 3, true, true, 0, 1500, 2, 1},
                             SimConfig{3, 30, 91, 8, true, true, 5, 2000, 3, 1},
                             SimConfig{3, 40, 91, 8, true, false, 0, 1500, 4, 1},
                             SimConfig{4, 30, 128, 7, false, true, 0, 1500, 5, 1},
                             SimConfig{16, 400, 256, 64, true, true, 0, 2000, 6, 1},
                             // Micro-batches: 2 and 3 steps in flight, small and large caches.
                             SimConfig{16, 12, 64, 16, true, true, 0, 1500, 7, 2},
                             SimConfig{3, 30, 91, 8, true, true, 5, 2000, 8, 3},
                             SimConfig{4, 40, 91, 8, false, false, 0, 1500, 9, 2},
                             SimConfig{16, 400, 256, 64, true, true, 0, 2000, 10, 3}));

}  // namespace
}  // namespace inflight
