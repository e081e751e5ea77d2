// Sampler: one logits row -> one token, for one choice of one request.
//
// Order of operations on the row [vocab]:
//   1. logprobs (when asked) from the raw row: log_softmax, chosen token + top-N alternatives
//   2. repetition penalty over prompt and output tokens; frequency/presence over output tokens
//   3. suppressed tokens (EOS and stop ids before min_tokens) -> -inf
//   4. temperature 0: argmax, ties to the lowest id. Otherwise keep min-p (on logits divided by
//      the temperature), then the top-k, then the top-p candidates, ranked by logit with ties to
//      the lower id, and draw one by inverse CDF over exp(logit / temperature).
// The draw is a pure function of (seed, choice, output index), so a request's tokens do not
// depend on what else is in the batch or on how often it was preempted.
//
// Two inputs, one result: the whole row (the reference), or only its best candidates and its
// log-sum-exp, computed on the device (ops/top_k_logits.h). candidates_needed() says when the
// candidates suffice: no penalties, nothing suppressed, and greedy or top-k sampling; then the
// two give the same token and the same logprob alternatives (logprob values differ only by the
// rounding of the log-sum-exp). Ranking by the logit before the temperature (not after, where
// rounding can create ties) is what makes that exact.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "inflight/request.h"
#include "inflight/sampling_params.h"
#include "runtime/logits_view.h"

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
  // From the whole row when view.full is set, else from the candidates, which must number at
  // least candidates_needed(...) (the row's modified in place only in the first case).
  int32_t sample(const LogitsView& view, const SamplingContext& ctx, TokenLogprob* logprob);

  // How many best candidates of the raw row decide the token and its logprobs for `params`, or
  // 0 when the whole row is needed (penalties, `suppressing` tokens this step, sampling over the
  // whole vocabulary without top-k).
  static int32_t candidates_needed(const SamplingParams& params, bool suppressing);

  // The uniform draw in [0, 1) for output token `step` of `choice` under `seed`.
  static double uniform(uint64_t seed, int32_t choice, int32_t step);

  // The log-probability of `token` under the raw row [vocab] and the row's `top_n` most likely
  // tokens (best first, equal logits by lower id), into `out`.
  void fill_logprobs(std::span<const float> raw, int32_t token, int32_t top_n,
                     TokenLogprob& out) const;

 private:
  void apply_penalties(std::span<float> logits, const SamplingContext& ctx);
  int32_t draw(std::span<const float> logits, const SamplingParams& p, double u);
  int32_t draw_candidates(const LogitsView& view, const SamplingParams& p, double u);
  // Inverse-CDF pick over candidates_ with weights exp(l / T - max / T), cut to the top-p
  // prefix when top_p_cut (candidates_ then ranked best first).
  int32_t pick(std::span<const float> logits_of_candidates, float inv_t, float max_scaled,
               bool top_p_cut, const SamplingParams& p, double u);

  int64_t vocab_size_;
  std::vector<float> raw_;        // [vocab] copy of the row before penalties
  std::vector<int32_t> counts_;   // [vocab] output-token counts, zero between calls
  std::vector<uint8_t> seen_;     // [vocab] prompt|output membership, zero between calls
  std::vector<int32_t> touched_;  // ids set in counts_/seen_ this call
  std::vector<int32_t> candidates_;
  std::vector<float> candidate_logits_;
  std::vector<double> weights_;
};

}  // namespace inflight
