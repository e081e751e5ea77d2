// Sampler: one logits row -> one token, for one choice of one request.
//
// Order of operations on the row [vocab]:
//   1. logprobs (when asked) from the raw row: log_softmax, chosen token + top-N alternatives
//   2. repetition penalty over prompt and output tokens; frequency/presence over output tokens
//   3. suppressed tokens (EOS and stop ids before min_tokens) -> -inf
//   4. temperature 0: argmax, ties to the lowest id. Otherwise divide by temperature, keep
//      min-p, then top-k, then top-p candidates, and draw one by inverse CDF.
// The draw is a pure function of (seed, choice, output index), so a request's tokens do not
// depend on what else is in the batch or on how often it was preempted.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "inflight/request.h"
#include "inflight/sampling_params.h"

namespace inflight {

struct SamplingContext {
  const SamplingParams* params = nullptr;
  std::span<const int32_t> prompt;  // prompt token ids
  std::span<const int32_t> output;  // tokens this choice generated so far
  uint64_t seed = 0;
  int32_t choice = 0;
  std::span<const int32_t> suppressed;  // token ids that must not be drawn
};

class Sampler {
 public:
  explicit Sampler(int64_t vocab_size);

  // `logits` [vocab] is modified in place. Fills *logprob (token, logprob, top alternatives)
  // when params->logprobs is set and logprob is not null.
  int32_t sample(std::span<float> logits, const SamplingContext& ctx, TokenLogprob* logprob);

  // The uniform draw in [0, 1) for output token `step` of `choice` under `seed`.
  static double uniform(uint64_t seed, int32_t choice, int32_t step);

 private:
  void apply_penalties(std::span<float> logits, const SamplingContext& ctx);
  int32_t draw(std::span<const float> logits, const SamplingParams& p, double u);
  void fill_logprobs(std::span<const float> raw, int32_t token, int32_t top_n,
                     TokenLogprob& out) const;

  int64_t vocab_size_;
  std::vector<float> raw_;        // [vocab] copy of the row before penalties
  std::vector<int32_t> counts_;   // [vocab] output-token counts, zero between calls
  std::vector<uint8_t> seen_;     // [vocab] prompt|output membership, zero between calls
  std::vector<int32_t> touched_;  // ids set in counts_/seen_ this call
  std::vector<int32_t> candidates_;
  std::vector<double> weights_;
};

}  // namespace inflight
