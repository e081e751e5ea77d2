// Turns the scheduler's decision into the ForwardBatch a ModelRunner executes.
#pragma once

#include <cstdint>

#include "engine/scheduler.h"
#include "runtime/forward_batch.h"

namespace inflight {

// One row of token_ids per scheduled token, sequences in `out.scheduled` order; the logits
// rows requested are those of the sequences with `sample` set, in the same order.
// Reuses `batch`'s storage.
void build_forward_batch(const SchedulerOutput& out, int32_t block_size, ForwardBatch& batch);

}  // namespace inflight
