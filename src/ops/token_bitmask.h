// token_bitmask: structured output's mask on logits rows, applied before the candidates are
// selected (top_k_logits.h) and before whole rows are copied to the host.
// For each masked row m of [masked rows]:
//   logits[rows[m], v] = -inf  for every v in [0, vocab) whose bit is clear in bitmask[m]
// where bitmask [masked rows, words] holds u32 words (stored as i32), words = ceil(vocab / 32),
// and token v's bit is bit v % 32 of word v / 32. Rows not listed are left alone.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace inflight {

struct TokenBitmaskParams {
  float* logits = nullptr;            // [logits rows, vocab]
  const int32_t* rows = nullptr;      // [masked rows]: indices into the logits rows
  const uint32_t* bitmask = nullptr;  // [masked rows, words]
  int64_t logits_rows = 0;
  int64_t vocab = 0;
  int64_t masked_rows = 0;
  int64_t words = 0;
};

// Validates: logits [R, V] f32, rows [M] i32, bitmask [M, ceil(V / 32)] i32, all on the
// logits' device (row indices are checked by the kernels: out of [0, R) is skipped on CUDA and
// an error on the CPU).
TokenBitmaskParams make_token_bitmask_params(const Tensor& logits, const Tensor& rows,
                                             const Tensor& bitmask);

// The reference; rows in parallel.
void token_bitmask_cpu(const TokenBitmaskParams& p);

}  // namespace inflight
