// top_k_logits: what the sampler needs from a logits row when it does not need the whole row.
// For each row r of logits [rows, vocab] (f32):
//   log_sum_exp[r]      log(sum_i exp(logits[r, i])), -inf for a row of -inf only
//   top_ids[r, 0..k)    the k largest entries, best first; equal values by lower id (the total
//   top_logits[r, 0..k) order of the host sampler: argmax ties go to the lowest id)
// so that greedy, top-k sampling and logprobs (chosen token + top alternatives) come from k
// candidates and one number per row instead of vocab floats per row.
// NOTE: -0.0 and +0.0 count as equal; rows containing NaN give unspecified candidates.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace inflight {

// The largest k served; the engine asks for the whole row beyond it.
constexpr int32_t kTopKLogitsMax = 256;

struct TopKLogitsParams {
  const float* logits = nullptr;  // [rows, vocab]
  float* log_sum_exp = nullptr;   // [rows]
  int32_t* top_ids = nullptr;     // [rows, k]
  float* top_logits = nullptr;    // [rows, k]
  int64_t rows = 0;
  int64_t vocab = 0;
  int32_t k = 0;
};

// Validates: logits [R, V] f32, 1 <= k <= min(V, kTopKLogitsMax), log_sum_exp [R] f32, top_ids
// [R, k] i32, top_logits [R, k] f32, all on the logits' device.
TopKLogitsParams make_top_k_logits_params(const Tensor& logits, int32_t k,
                                          const Tensor& log_sum_exp, const Tensor& top_ids,
                                          const Tensor& top_logits);

// The reference: log-sum-exp accumulated in double, candidates by partial sort; rows in
// parallel.
void top_k_logits_cpu(const TopKLogitsParams& p);

}  // namespace inflight
