// Turns the scheduler's decision into the ForwardBatch a ModelRunner executes.
#pragma once

#include <cstdint>

#include "engine/scheduler.h"
#include "runtime/forward_batch.h"

namespace inflight {

// One row of token_ids per scheduled token, sequences in `out.scheduled` order; the logits
// rows requested are, per scheduled sequence in the same order, its prompt logprob rows
// (ScheduledSequence::prompt_rows) and then its sample row (when `sample` is set).
// Reuses `batch`'s storage.
void build_forward_batch(const SchedulerOutput& out, int32_t block_size, ForwardBatch& batch);

}  // namespace inflight
