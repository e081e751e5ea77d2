#include "eval/next_token_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/thread_pool.h"

namespace inflight::eval {

double log_sum_exp(std::span<const float> logits) {
  INFLIGHT_CHECK(!logits.empty(), "log_sum_exp of an empty row");
  double max = -std::numeric_limits<double>::infinity();
  for (const float z : logits) max = std::max(max, static_cast<double>(z));
  if (!std::isfinite(max)) return max;  // +inf, or every logit -inf
  double sum = 0.0;
  for (const float z : logits) sum += std::exp(static_cast<double>(z) - max);
  return max + std::log(sum);
}

int32_t argmax(std::span<const float> logits) {
  INFLIGHT_CHECK(!logits.empty(), "argmax of an empty row");
  size_t best = 0;
  for (size_t v = 1; v < logits.size(); ++v) {
    if (logits[v] > logits[best]) best = v;
  }
  return static_cast<int32_t>(best);
}

double kl_divergence(std::span<const float> ref, double ref_lse, std::span<const float> cand,
                     double cand_lse) {
  INFLIGHT_CHECK(ref.size() == cand.size(), "kl_divergence of rows of {} and {} logits", ref.size(),
                 cand.size());
  double kl = 0.0;
  for (size_t v = 0; v < ref.size(); ++v) {
    const double log_p = static_cast<double>(ref[v]) - ref_lse;
    const double log_q = static_cast<double>(cand[v]) - cand_lse;
    const double p = std::exp(log_p);
    if (p > 0.0) kl += p * (log_p - log_q);  // p log(p / q), 0 where p underflows to 0
  }
  // Rounding can leave a tiny negative sum for identical distributions.
  return std::max(kl, 0.0);
}

void NextTokenMetrics::add(const PositionScore& s) {
  ++num_tokens_;
  num_top1_agree_ += s.top1_agrees ? 1 : 0;
  sum_nll_ += s.nll;
  sum_kl_ += s.kl;
  max_kl_ = std::max(max_kl_, s.kl);
}

void NextTokenMetrics::merge(const NextTokenMetrics& other) {
  num_tokens_ += other.num_tokens_;
  num_top1_agree_ += other.num_top1_agree_;
  sum_nll_ += other.sum_nll_;
  sum_kl_ += other.sum_kl_;
  max_kl_ = std::max(max_kl_, other.max_kl_);
}

double NextTokenMetrics::mean_nll() const {
  return num_tokens_ == 0 ? 0.0 : sum_nll_ / static_cast<double>(num_tokens_);
}

double NextTokenMetrics::perplexity() const {
  return std::exp(mean_nll());
}

double NextTokenMetrics::mean_kl() const {
  return num_tokens_ == 0 ? 0.0 : sum_kl_ / static_cast<double>(num_tokens_);
}

double NextTokenMetrics::top1_agreement() const {
  return num_tokens_ == 0 ? 0.0
                          : static_cast<double>(num_top1_agree_) / static_cast<double>(num_tokens_);
}

ReferenceRows prepare_reference(Tensor logits) {
  INFLIGHT_CHECK(
      logits.dim() == 2 && logits.dtype() == DType::kF32 && logits.device() == Device::kCpu,
      "reference logits must be host f32 [rows, vocab], got {}", shape_str(logits.shape()));
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  ReferenceRows ref;
  ref.lse.resize(static_cast<size_t>(rows));
  ref.top1.resize(static_cast<size_t>(rows));
  const float* z = logits.data<float>();
  ThreadPool::global().parallel_for(rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const std::span<const float> row(z + r * vocab, static_cast<size_t>(vocab));
      ref.lse[r] = log_sum_exp(row);
      ref.top1[r] = argmax(row);
    }
  });
  ref.logits = std::move(logits);
  return ref;
}

NextTokenMetrics score_rows(const ReferenceRows& ref, const Tensor* cand,
                            std::span<const int32_t> targets, std::string_view what) {
  const int64_t rows = static_cast<int64_t>(targets.size()), vocab = ref.logits.size(1);
  INFLIGHT_CHECK(rows <= ref.logits.size(0), "{} targets for {} reference rows", rows,
                 ref.logits.size(0));
  if (cand != nullptr) {
    INFLIGHT_CHECK(cand->dim() == 2 && cand->dtype() == DType::kF32 && cand->size(1) == vocab &&
                       cand->size(0) >= rows,
                   "{}: logits {} do not match the reference's {}", what, shape_str(cand->shape()),
                   shape_str(ref.logits.shape()));
  }
  for (const int32_t t : targets) {
    INFLIGHT_CHECK(t >= 0 && t < vocab, "{}: target token {} outside the vocabulary of {}", what, t,
                   vocab);
  }
  const float* zr = ref.logits.data<float>();
  const float* zc = cand != nullptr ? cand->data<float>() : nullptr;
  std::vector<PositionScore> scores(static_cast<size_t>(rows));
  std::vector<uint8_t> finite(static_cast<size_t>(rows), 1);
  ThreadPool::global().parallel_for(rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int32_t target = targets[r];
      const std::span<const float> row_ref(zr + r * vocab, static_cast<size_t>(vocab));
      PositionScore& s = scores[r];
      if (zc == nullptr) {
        s.nll = ref.lse[r] - static_cast<double>(row_ref[target]);
        finite[r] = std::isfinite(s.nll);
        continue;
      }
      const std::span<const float> row(zc + r * vocab, static_cast<size_t>(vocab));
      const double lse = log_sum_exp(row);
      s.nll = lse - static_cast<double>(row[target]);
      s.kl = kl_divergence(row_ref, ref.lse[r], row, lse);
      s.top1_agrees = argmax(row) == ref.top1[r];
      finite[r] = std::isfinite(s.nll) && std::isfinite(s.kl);
    }
  });
  NextTokenMetrics out;
  for (int64_t r = 0; r < rows; ++r) {
    INFLIGHT_CHECK(finite[r], "{}: row {} has non-finite logits (nll {}, kl {})", what, r,
                   scores[r].nll, scores[r].kl);
    out.add(scores[r]);
  }
  return out;
}

}  // namespace inflight::eval
