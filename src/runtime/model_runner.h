// ModelRunner: what the engine needs from a model on a device, nothing more.
//
// The engine owns block ids and builds each step's ForwardBatch; the runner owns the weights,
// the backend and the KV cache storage. A step is split in two so that an asynchronous backend
// can run step N on the device while the engine does host work:
//
//   runner.begin_step(batch, request);        // enqueue the step (returns before it ran)
//   ... host work that does not touch this step's sequences ...
//   const StepLogits& out = runner.end_step(); // wait; what `request` asked for, per row
//
// A runner over pipeline stages takes up to max_steps_in_flight() steps before the first is
// ended (micro-batches: stage s computes step k while stage s + 1 computes step k - 1); end_step
// then finishes them in the order they were begun. Steps in flight together must not share a
// sequence (each one's input follows from the tokens of the one before), and every step begun
// is ended before the runner is destroyed.
//
// Each logits row comes back either as its best candidates (+ log-sum-exp), computed on the
// device, or whole: a step of 256 rows of a 128k vocabulary is 128 MB of f32 logits, too much
// to copy to the host every step, while greedy, top-k sampling and logprobs need only the top.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "formats/model_config.h"
#include "runtime/forward_batch.h"
#include "runtime/logits_view.h"

namespace inflight {

// Thrown out of a step that was abandoned half-way (ModelRunner::set_abandon_flag): the step
// produced nothing, and the KV slots it was writing hold partial values, so its sequences must
// be dropped (they are: a step is abandoned only when every request in it was cancelled).
class StepAbandoned : public std::runtime_error {
 public:
  StepAbandoned() : std::runtime_error("step abandoned: every request in it was cancelled") {}
};

// The largest number of candidates a runner computes per row (ops/top_k_logits.h); a row that
// needs more comes back whole.
constexpr int32_t kMaxLogitsTopK = 256;

// What the sampler needs back from one step, per logits row.
struct LogitsRequest {
  // Candidates per row, the same k for every row (0: none); at most min(vocab, kMaxLogitsTopK).
  int32_t top_k = 0;
  // Rows that come back whole (penalties, full-vocabulary sampling), ascending.
  std::vector<int32_t> full_rows;
  // Ids at or above this are never sampled (0: none such): the columns of an LM head padded past
  // the tokenizer become -inf in every row before anything reads the logits, so they are no
  // candidates, weigh nothing in log-sum-exps and come back -inf in whole rows.
  int64_t sampled_vocab = 0;
  // Structured output: the constrained rows, ascending, and what fills their token bitmasks
  // [masked_rows.size(), ceil(vocab / 32)] (u32 words; bit v % 32 of word v / 32 allows token v).
  // The runner calls fill_masks once the step's forward is enqueued, so that on an asynchronous
  // device the host computes the masks while the forward runs; disallowed logits then become
  // -inf before the candidates are selected and before whole rows are copied.
  std::vector<int32_t> masked_rows;
  std::function<void(std::span<uint32_t> masks)> fill_masks;
};

// The logits of one step on the host, as requested.
struct StepLogits {
  int32_t num_rows = 0;
  int64_t vocab_size = 0;
  int32_t top_k = 0;
  Tensor log_sum_exp;               // [rows] f32, when top_k > 0
  Tensor top_ids;                   // [rows, top_k] i32, best first, equal logits by lower id
  Tensor top_logits;                // [rows, top_k] f32
  Tensor full;                      // [full rows, vocab] f32
  std::vector<int32_t> full_index;  // [rows]: the row of `full`, or -1

  // Row r as the sampler reads it (whole when it came back whole, else its candidates).
  LogitsView row(int32_t r);
};

// Device memory of the runner besides the KV cache, for the engine's memory plan.
struct RunnerMemory {
  int64_t total = 0;      // the device's memory
  int64_t free = 0;       // allocatable now (after weights and workspace)
  int64_t weights = 0;    // bytes of weights on the device
  int64_t workspace = 0;  // bytes of the step workspace (after reserve_workspace)
  int64_t reserve = 0;    // kept free for graphs, library kernels and the runtime
  bool host = false;      // the device's memory is the host's (the CPU backend)
};

// The device's timeline around the step ended last (asynchronous runners).
struct StepDeviceTime {
  double busy_s = 0.0;          // from the step's first device op to its last
  double idle_before_s = -1.0;  // since the previous step's last op (negative: no step before)
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const ModelConfig& model_config() const = 0;
  // "cpu", "cuda:0", ... for logs and stats.
  virtual std::string_view device_name() const = 0;

  // Allocates the activation workspace for steps of up to `max_num_batched_tokens` tokens and
  // `max_num_seqs` logits rows, so that steps never allocate. Called once, before the KV cache.
  virtual void reserve_workspace(int32_t max_num_batched_tokens, int32_t max_num_seqs) = 0;
  virtual RunnerMemory memory() const = 0;

  // Bytes one KV block of `block_size` tokens takes (all layers, K and V).
  virtual int64_t kv_bytes_per_block(int32_t block_size) const = 0;
  // Allocates the paged KV cache. Called once, before the first step. Throws Error
  // (kOutOfMemory, kInvalidArgument) when it cannot.
  virtual void init_kv_cache(int64_t num_blocks, int32_t block_size) = 0;

  // Whether begin_step() returns while the device still computes the step (the engine then
  // overlaps host work with it); false when begin_step() does all the work (CPU).
  virtual bool asynchronous() const = 0;
  // Whether steps may carry token masks (LogitsRequest::masked_rows): the logits this process
  // samples from are computed here, over the whole vocabulary.
  virtual bool supports_token_masks() const { return false; }
  // A flag the runner polls while a synchronous step computes: once it is true, begin_step()
  // throws StepAbandoned and the step never happened, except for
  // partial KV writes of its sequences, which the caller drops. Set once, before any step.
  virtual void set_abandon_flag(const std::atomic<bool>* /*flag*/) {}

  // How many steps may be in flight at once (begun and not yet ended): the pipeline stages a
  // step passes through in turn; 1 for a runner that computes one step at a time.
  virtual int32_t max_steps_in_flight() const { return 1; }
  // Starts one step. `batch` and `request` stay alive and unchanged until the end_step() that
  // finishes this step returns; `request` says what comes back for the rows of
  // batch.logits_indices.
  virtual void begin_step(const ForwardBatch& batch, const LogitsRequest& request) = 0;
  // Finishes the oldest step in flight. The result is valid until the next begin_step(). Throws
  // Error when the step failed.
  virtual StepLogits& end_step() = 0;
  // After end_step(): the device time of that step, where the device keeps a timeline.
  virtual std::optional<StepDeviceTime> last_step_device_time() const { return std::nullopt; }
};

}  // namespace inflight
