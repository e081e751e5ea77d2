// vocab_padding_mask: the LM head's rows beyond the tokenizer (a vocabulary padded to a
// multiple of 64 or 128: Qwen2's 151,936 columns for 151,665 tokens) are ids no text has; their
// logits become -inf before anything reads the row, so they are never sampled, never candidates
// and weigh nothing in logprobs. For every row r of logits [rows, columns]:
//   logits[r, c] = -inf  for c in [begin, columns)
// (a rank that holds a slice of the vocabulary passes `begin` relative to its first column).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace inflight {

struct VocabPaddingMaskParams {
  float* logits = nullptr;  // [rows, columns]
  int64_t rows = 0;
  int64_t columns = 0;
  int64_t begin = 0;  // first masked column, in [0, columns]
};

// Validates: logits [R, C] f32, 0 <= begin <= C.
VocabPaddingMaskParams make_vocab_padding_mask_params(const Tensor& logits, int64_t begin);

// The reference.
void vocab_padding_mask_cpu(const VocabPaddingMaskParams& p);

}  // namespace inflight
