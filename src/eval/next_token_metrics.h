// Next-token metrics of a model against a reference on the same text: the math of `inflight
// eval` (docs/quantization.md, "Accuracy").
//
// At each scored position t of a window, with logits z over the whole vocabulary V and the token
// x that actually follows, log p(v) = z[v] - logsumexp(z), computed in double:
//   nll(t)       = -log p(x)                                   perplexity = exp(mean nll)
//   KL(ref||m)   = sum_v p_ref(v) (log p_ref(v) - log p_m(v))   (>= 0; 0 iff the distributions
//   match) top-1 agrees = argmax z_ref == argmax z_m                   (ties: the lowest id, as
//   greedy)
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace inflight::eval {

// log sum_v exp(z[v]) in double, shifted by the maximum. z must not be empty.
double log_sum_exp(std::span<const float> logits);
// The index of the largest logit, the lowest one among equals.
int32_t argmax(std::span<const float> logits);
// KL(ref || cand) of two logit rows of the same length with their log_sum_exp values.
double kl_divergence(std::span<const float> ref, double ref_lse, std::span<const float> cand,
                     double cand_lse);

// One model's figures at one position.
struct PositionScore {
  double nll = 0.0;
  double kl = 0.0;          // against the reference (0 for the reference itself)
  bool top1_agrees = true;  // with the reference
};

// Sums over scored positions, in the order they were added.
class NextTokenMetrics {
 public:
  void add(const PositionScore& s);
  void merge(const NextTokenMetrics& other);

  int64_t num_tokens() const { return num_tokens_; }
  double mean_nll() const;
  double perplexity() const;  // exp(mean_nll)
  double mean_kl() const;
  double max_kl() const { return max_kl_; }
  double top1_agreement() const;  // fraction in [0, 1]

 private:
  int64_t num_tokens_ = 0;
  int64_t num_top1_agree_ = 0;
  double sum_nll_ = 0.0;
  double sum_kl_ = 0.0;
  double max_kl_ = 0.0;
};

// A window's reference logits (host f32 [rows, vocab]) with what every comparison needs of
// each row, computed once: log_sum_exp and argmax.
struct ReferenceRows {
  Tensor logits;
  std::vector<double> lse;
  std::vector<int32_t> top1;
};
ReferenceRows prepare_reference(Tensor logits);

// The scores of rows [0, targets.size()) of `cand` (host f32 [>= targets.size(), vocab], or null
// for the reference itself) against `ref`, targets[i] the token following row i, added to a
// fresh NextTokenMetrics in row order. Rows are scored on ThreadPool::global(). Throws
// Error(kInternal) naming `what` and the row when a logit row is not finite (NaN, +inf).
NextTokenMetrics score_rows(const ReferenceRows& ref, const Tensor* cand,
                            std::span<const int32_t> targets, std::string_view what);

}  // namespace inflight::eval
