#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/hash.h"

namespace inflight {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Temperatures below this are greedy: dividing by them would overflow to inf.
constexpr float kGreedyTemperature = 1e-5f;

// Larger logit first; equal logits by lower id, so every order below is total and repeatable.
struct HigherLogit {
  std::span<const float> logits;
  bool operator()(int32_t a, int32_t b) const {
    const float la = logits[static_cast<size_t>(a)];
    const float lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  }
};

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

// NOTE: a NaN or +Inf logit means the model's arithmetic broke (non-finite weights, an
// overflow): no token drawn from such a row means anything, and greedy decoding would pick an
// arbitrary one as if nothing were wrong. -Inf is a masked token and is fine.
bool usable(float logit) {
  return logit < std::numeric_limits<float>::infinity();
}

void check_finite(std::span<const float> logits) {
  bool ok = true;
  for (const float l : logits) ok &= usable(l);  // no early exit: the loop vectorises
  INFLIGHT_CHECK(ok,
                 "the model computed a non-finite logit (NaN or +Inf): its weights or "
                 "activations are not finite");
}

}  // namespace

Sampler::Sampler(int64_t vocab_size)
    : vocab_size_(vocab_size),
      counts_(static_cast<size_t>(vocab_size), 0),
      seen_(static_cast<size_t>(vocab_size), 0) {
  INFLIGHT_CHECK(vocab_size > 0, "sampler needs a vocabulary, got size {}", vocab_size);
}

double Sampler::uniform(uint64_t seed, int32_t choice, int32_t step) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ static_cast<uint32_t>(choice));
  h = splitmix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(step)) << 32));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<float> logits, const SamplingContext& ctx,
                        TokenLogprob* logprob) {
  INFLIGHT_CHECK(static_cast<int64_t>(logits.size()) == vocab_size_,
                 "logits row has {} entries, vocabulary {}", logits.size(), vocab_size_);
  check_finite(logits);
  const SamplingParams& p = *ctx.params;
  const bool want_logprobs = logprob != nullptr && p.logprobs.has_value();
  if (want_logprobs) raw_.assign(logits.begin(), logits.end());

  apply_penalties(logits, ctx);
  for (const auto& [t, bias] : p.logit_bias) logits[static_cast<size_t>(t)] += bias;
  for (int32_t t : ctx.suppressed) {
    if (t >= 0 && t < vocab_size_) logits[static_cast<size_t>(t)] = kNegInf;
  }

  int32_t token;
  if (p.temperature < kGreedyTemperature) {
    token = argmax(logits);
  } else {
    const auto step = static_cast<int32_t>(ctx.output.size());
    token = draw(logits, p, uniform(ctx.seed, ctx.choice, step));
  }
  if (want_logprobs) fill_logprobs(raw_, token, *p.logprobs, *logprob);
  return token;
}

int32_t Sampler::sample(const LogitsView& view, const SamplingContext& ctx, TokenLogprob* logprob) {
  if (!view.full.empty()) return sample(view.full, ctx, logprob);
  const SamplingParams& p = *ctx.params;
  const auto needed = static_cast<size_t>(candidates_needed(p, !ctx.suppressed.empty()));
  INFLIGHT_CHECK(
      needed > 0 && view.top_ids.size() >= needed && view.top_logits.size() == view.top_ids.size(),
      "sampler: {} candidates given, {} needed (0: the whole row)", view.top_ids.size(), needed);
  // The sum over the whole row is not finite when any logit is NaN or +Inf.
  check_finite(std::span<const float>(&view.log_sum_exp, 1));
  check_finite(view.top_logits.first(1));
  int32_t token;
  if (p.temperature < kGreedyTemperature) {
    token = view.top_ids[0];
  } else {
    const auto step = static_cast<int32_t>(ctx.output.size());
    token = draw_candidates(view, p, uniform(ctx.seed, ctx.choice, step));
  }
  if (logprob != nullptr && p.logprobs.has_value()) {
    const double log_z = static_cast<double>(view.log_sum_exp);
    auto logprob_at = [&](size_t j) {
      return static_cast<float>(static_cast<double>(view.top_logits[j]) - log_z);
    };
    const auto at = static_cast<size_t>(std::find(view.top_ids.begin(), view.top_ids.end(), token) -
                                        view.top_ids.begin());
    INFLIGHT_CHECK(at < view.top_ids.size(), "sampler: token {} is not a candidate", token);
    logprob->token_id = token;
    logprob->logprob = logprob_at(at);
    logprob->top.clear();
    const auto top_n = std::min(static_cast<size_t>(*p.logprobs), view.top_ids.size());
    for (size_t j = 0; j < top_n; ++j) logprob->top.emplace_back(view.top_ids[j], logprob_at(j));
  }
  return token;
}

int32_t Sampler::candidates_needed(const SamplingParams& p, bool suppressing) {
  if (suppressing || p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f ||
      p.presence_penalty != 0.0f || !p.logit_bias.empty()) {
    return 0;
  }
  int32_t k = 0;
  if (p.temperature < kGreedyTemperature) {
    k = 1;
  } else if (p.top_k > 0) {
    k = p.top_k;
  } else {
    return 0;  // the draw ranges over the whole vocabulary
  }
  if (p.logprobs) k = std::max(k, *p.logprobs);
  return k;
}

void Sampler::apply_penalties(std::span<float> logits, const SamplingContext& ctx) {
  const SamplingParams& p = *ctx.params;
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool additive = p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (!repetition && !additive) return;
  touched_.clear();
  auto touch = [&](int32_t t) {
    if (t < 0 || t >= vocab_size_) return false;
    const auto i = static_cast<size_t>(t);
    if (!seen_[i] && counts_[i] == 0) touched_.push_back(t);
    return true;
  };
  if (repetition) {
    for (int32_t t : ctx.prompt) {
      if (touch(t)) seen_[static_cast<size_t>(t)] = 1;
    }
  }
  for (int32_t t : ctx.output) {
    if (!touch(t)) continue;
    seen_[static_cast<size_t>(t)] = 1;
    ++counts_[static_cast<size_t>(t)];
  }
  for (int32_t t : touched_) {
    const auto i = static_cast<size_t>(t);
    float& l = logits[i];
    if (repetition && seen_[i]) l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
    if (counts_[i] > 0) {
      l -= p.frequency_penalty * static_cast<float>(counts_[i]) + p.presence_penalty;
    }
    seen_[i] = 0;  // back to all-zero for the next call
    counts_[i] = 0;
  }
}

int32_t Sampler::draw(std::span<const float> logits, const SamplingParams& p, double u) {
  const float inv_t = 1.0f / p.temperature;
  const float max_logit = logits[static_cast<size_t>(argmax(logits))];
  INFLIGHT_CHECK(max_logit > kNegInf, "every token is masked: nothing can be sampled");
  // min-p: p_i >= min_p * p_max  <=>  l_i / T >= max / T + log(min_p)
  const float floor =
      p.min_p > 0.0f ? max_logit * inv_t + std::log(p.min_p) : std::numeric_limits<float>::lowest();
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > kNegInf && logits[i] * inv_t >= floor) {
      candidates_.push_back(static_cast<int32_t>(i));
    }
  }
  const HigherLogit higher{logits};
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < candidates_.size()) {
    std::nth_element(candidates_.begin(), candidates_.begin() + p.top_k, candidates_.end(), higher);
    candidates_.resize(static_cast<size_t>(p.top_k));
  }
  // Ranked whenever a rank matters (top-k or top-p); otherwise in id order.
  const bool top_p = p.top_p < 1.0f;
  if (top_p || p.top_k > 0) std::sort(candidates_.begin(), candidates_.end(), higher);
  candidate_logits_.resize(candidates_.size());
  for (size_t i = 0; i < candidates_.size(); ++i) {
    candidate_logits_[i] = logits[static_cast<size_t>(candidates_[i])];
  }
  return pick(candidate_logits_, inv_t, max_logit * inv_t, top_p, p, u);
}

int32_t Sampler::draw_candidates(const LogitsView& view, const SamplingParams& p, double u) {
  const float inv_t = 1.0f / p.temperature;
  const float max_logit = view.top_logits[0];
  INFLIGHT_CHECK(max_logit > kNegInf, "every token is masked: nothing can be sampled");
  const float floor =
      p.min_p > 0.0f ? max_logit * inv_t + std::log(p.min_p) : std::numeric_limits<float>::lowest();
  // Ranked best first, so the min-p survivors are a prefix and top-k keeps the first k of them.
  const size_t limit = std::min(static_cast<size_t>(p.top_k), view.top_ids.size());
  candidates_.clear();
  candidate_logits_.clear();
  for (size_t j = 0; j < limit; ++j) {
    const float l = view.top_logits[j];
    if (!(l > kNegInf && l * inv_t >= floor)) break;
    candidates_.push_back(view.top_ids[j]);
    candidate_logits_.push_back(l);
  }
  return pick(candidate_logits_, inv_t, max_logit * inv_t, p.top_p < 1.0f, p, u);
}

int32_t Sampler::pick(std::span<const float> logits_of_candidates, float inv_t, float max_scaled,
                      bool top_p_cut, const SamplingParams& p, double u) {
  weights_.resize(candidates_.size());
  double total = 0.0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    weights_[i] = std::exp(static_cast<double>(logits_of_candidates[i] * inv_t) -
                           static_cast<double>(max_scaled));
    total += weights_[i];
  }
  size_t kept = candidates_.size();
  if (top_p_cut) {  // smallest most-likely prefix whose mass reaches top_p
    const double target = static_cast<double>(p.top_p) * total;
    double mass = 0.0;
    for (kept = 0; kept < candidates_.size();) {
      mass += weights_[kept++];
      if (mass >= target) break;
    }
    total = mass;
  }
  const double x = u * total;
  double acc = 0.0;
  for (size_t i = 0; i < kept; ++i) {
    acc += weights_[i];
    if (x < acc) return candidates_[i];
  }
  return candidates_[kept - 1];  // u * total rounded up to the whole mass
}

void Sampler::fill_logprobs(std::span<const float> raw, int32_t token, int32_t top_n,
                            TokenLogprob& out) const {
  const float max_logit = raw[static_cast<size_t>(argmax(raw))];
  const float own = raw[static_cast<size_t>(token)];
  // One pass: the normaliser and the token's rank.
  double sum = 0.0;
  int32_t higher_count = 0;
  for (float l : raw) {
    sum += std::exp(static_cast<double>(l) - max_logit);
    higher_count += l > own ? 1 : 0;
  }
  if (!std::isfinite(sum)) check_finite(raw);  // a NaN or infinite logit: the error names it
  const double log_z = static_cast<double>(max_logit) + std::log(sum);
  auto logprob_of = [&](int32_t t) {
    return static_cast<float>(static_cast<double>(raw[static_cast<size_t>(t)]) - log_z);
  };
  out.token_id = token;
  out.logprob = logprob_of(token);
  out.rank = 1 + higher_count;
  out.top.clear();
  if (top_n <= 0) return;
  const HigherLogit higher{raw};
  std::vector<int32_t> best;  // the top_n ids so far, best first
  best.reserve(static_cast<size_t>(top_n) + 1);
  for (int32_t t = 0; t < static_cast<int32_t>(raw.size()); ++t) {
    if (best.size() == static_cast<size_t>(top_n) && !higher(t, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), t, higher), t);
    if (best.size() > static_cast<size_t>(top_n)) best.pop_back();
  }
  for (int32_t t : best) out.top.emplace_back(t, logprob_of(t));
}

}  // namespace inflight
