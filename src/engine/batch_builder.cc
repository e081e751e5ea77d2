#include "engine/batch_builder.h"

#include <algorithm>

#include "core/check.h"

namespace inflight {

void build_forward_batch(const SchedulerOutput& out, int32_t block_size, ForwardBatch& batch) {
  batch.token_ids.clear();
  batch.positions.clear();
  batch.slot_mapping.clear();
  batch.query_start.assign(1, 0);
  batch.context_lens.clear();
  batch.block_tables.clear();
  batch.logits_indices.clear();

  int32_t max_blocks = 1;
  for (const ScheduledSequence& s : out.scheduled) {
    const int32_t context = s.seq->num_computed_tokens + s.num_new_tokens;
    max_blocks = std::max(max_blocks, (context + block_size - 1) / block_size);
  }
  batch.max_blocks_per_seq = max_blocks;
  batch.block_tables.reserve(out.scheduled.size() * static_cast<size_t>(max_blocks));

  for (const ScheduledSequence& s : out.scheduled) {
    const Sequence& seq = *s.seq;
    const int32_t begin = seq.num_computed_tokens;
    const int32_t end = begin + s.num_new_tokens;
    const int32_t num_blocks = (end + block_size - 1) / block_size;
    INFLIGHT_CHECK(s.num_new_tokens > 0 && end <= seq.num_tokens() &&
                       static_cast<size_t>(num_blocks) <= seq.block_table.size(),
                   "sequence {} scheduled tokens [{}, {}) of {} with {} blocks", seq.id, begin, end,
                   seq.num_tokens(), seq.block_table.size());
    for (int32_t t = begin; t < end; ++t) {
      batch.token_ids.push_back(seq.token_ids[static_cast<size_t>(t)]);
      batch.positions.push_back(t);
      const int64_t block = seq.block_table[static_cast<size_t>(t / block_size)];
      batch.slot_mapping.push_back(block * block_size + t % block_size);
    }
    batch.query_start.push_back(static_cast<int32_t>(batch.token_ids.size()));
    batch.context_lens.push_back(end);
    for (int32_t i = 0; i < max_blocks; ++i) {
      batch.block_tables.push_back(i < num_blocks ? seq.block_table[static_cast<size_t>(i)] : -1);
    }
    // Prompt logprob rows: positions from max(begin, done) on, then the sample row.
    const int32_t first_row =
        batch.query_start.back() - (end - std::max(begin, seq.num_prompt_logprobs));
    for (int32_t r = 0; r < s.prompt_rows; ++r) batch.logits_indices.push_back(first_row + r);
    if (s.sample) batch.logits_indices.push_back(static_cast<int32_t>(batch.token_ids.size()) - 1);
  }
}

}  // namespace inflight
