#include "runtime/forward_batch.h"

#include <algorithm>

#include "core/check.h"

namespace inflight {

#define BATCH_CHECK(cond, ...) INFLIGHT_CHECK_CODE((cond), ErrorCode::kInvalidArgument, __VA_ARGS__)

void ForwardBatch::validate(int32_t block_size, int64_t num_blocks) const {
  BATCH_CHECK(block_size > 0 && num_blocks > 0,
              "forward batch: KV cache geometry block_size={} num_blocks={} must be positive",
              block_size, num_blocks);
  const int64_t t_count = num_tokens(), s_count = num_seqs();
  BATCH_CHECK(t_count > 0, "forward batch: no tokens");
  BATCH_CHECK(s_count > 0, "forward batch: no sequences (context_lens is empty)");
  BATCH_CHECK(positions.size() == token_ids.size() && slot_mapping.size() == token_ids.size(),
              "forward batch: token_ids ({}), positions ({}) and slot_mapping ({}) must have one "
              "entry per token",
              token_ids.size(), positions.size(), slot_mapping.size());
  BATCH_CHECK(static_cast<int64_t>(query_start.size()) == s_count + 1,
              "forward batch: query_start has {} entries, expected num_seqs + 1 = {}",
              query_start.size(), s_count + 1);
  BATCH_CHECK(query_start.front() == 0 && query_start.back() == t_count,
              "forward batch: query_start must run from 0 to num_tokens ({}), got {}..{}", t_count,
              query_start.front(), query_start.back());
  BATCH_CHECK(max_blocks_per_seq >= 0 &&
                  static_cast<int64_t>(block_tables.size()) == s_count * max_blocks_per_seq,
              "forward batch: block_tables has {} entries, expected num_seqs * "
              "max_blocks_per_seq = {} * {}",
              block_tables.size(), s_count, max_blocks_per_seq);
  for (const int32_t id : token_ids) {
    BATCH_CHECK(id >= 0, "forward batch: negative token id {}", id);
  }
  for (int64_t s = 0; s < s_count; ++s) {
    const int32_t begin = query_start[s], end = query_start[s + 1];
    const int32_t n_new = end - begin, context = context_lens[s];
    BATCH_CHECK(n_new >= 1,
                "forward batch: sequence {} has {} new tokens (query_start must "
                "increase strictly)",
                s, n_new);
    BATCH_CHECK(context >= n_new, "forward batch: sequence {} has context_len {} < {} new tokens",
                s, context, n_new);
    const int64_t blocks_needed = (static_cast<int64_t>(context) + block_size - 1) / block_size;
    BATCH_CHECK(blocks_needed <= max_blocks_per_seq,
                "forward batch: sequence {} needs {} blocks of {} tokens for context_len {}, but "
                "block tables have {} columns",
                s, blocks_needed, block_size, context, max_blocks_per_seq);
    const int32_t* table = block_tables.data() + s * max_blocks_per_seq;
    for (int64_t b = 0; b < blocks_needed; ++b) {
      BATCH_CHECK(table[b] >= 0 && table[b] < num_blocks,
                  "forward batch: sequence {} block_tables[{}] = {} is outside [0, {})", s, b,
                  table[b], num_blocks);
    }
    for (int32_t i = 0; i < n_new; ++i) {
      const int32_t t = begin + i, expected = context - n_new + i;
      BATCH_CHECK(positions[t] == expected,
                  "forward batch: token {} (sequence {}) has position {}, expected {}: new tokens "
                  "must be the last tokens of the context",
                  t, s, positions[t], expected);
      const int64_t slot =
          static_cast<int64_t>(table[expected / block_size]) * block_size + expected % block_size;
      BATCH_CHECK(slot_mapping[t] == slot,
                  "forward batch: token {} (sequence {}, position {}) maps to slot {}, but its "
                  "block table puts that position at slot {}",
                  t, s, expected, slot_mapping[t], slot);
    }
  }
  std::vector<int64_t> slots(slot_mapping);
  std::sort(slots.begin(), slots.end());
  const auto dup = std::adjacent_find(slots.begin(), slots.end());
  BATCH_CHECK(dup == slots.end(), "forward batch: two tokens write KV slot {}", *dup);
  for (const int32_t row : logits_indices) {
    BATCH_CHECK(row >= 0 && row < t_count, "forward batch: logits index {} is outside [0, {})", row,
                t_count);
  }
}

#undef BATCH_CHECK

}  // namespace inflight
