// ForwardBatch: the host-side description of one model step over a ragged batch.
//
// The same layout serves prefill, chunked prefill and decode: each sequence contributes the
// tokens it computes this step (all of a prompt, a chunk of one, or a single decode token),
// and attends to its whole context through the paged KV cache.
//
// Example, block_size 4: sequence A computes prompt tokens 0..5 (6 tokens, blocks {7, 2}),
// sequence B decodes its token at position 9 (blocks {0, 5, 3}):
//   token_ids      = [a0 a1 a2 a3 a4 a5 b9]                 [num_tokens]
//   positions      = [0  1  2  3  4  5  9 ]                 [num_tokens]
//   slot_mapping   = [28 29 30 31 8  9  13]                 [num_tokens] block*4 + offset
//   query_start    = [0 6 7]                                [num_seqs + 1]
//   context_lens   = [6 10]                                 [num_seqs]   cached + new
//   block_tables   = [7 2 -1; 0 5 3]                        [num_seqs, max_blocks_per_seq]
//   logits_indices = [5 6]                                  rows whose logits are returned
//
// Invariants (checked by validate()): the new tokens of a sequence are the last tokens of its
// context, their positions are consecutive and end at context_len - 1, and every slot lies in a
// block of that sequence's table.
#pragma once

#include <cstdint>
#include <vector>

namespace inflight {

struct ForwardBatch {
  std::vector<int32_t> token_ids;
  std::vector<int32_t> positions;
  std::vector<int64_t> slot_mapping;
  std::vector<int32_t> query_start;
  std::vector<int32_t> context_lens;
  std::vector<int32_t> block_tables;
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> logits_indices;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(context_lens.size()); }

  // Throws Error(kInvalidArgument) on any broken invariant above, given the cache geometry.
  void validate(int32_t block_size, int64_t num_blocks) const;
};

}  // namespace inflight
