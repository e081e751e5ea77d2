// The control messages of a parallel job: what rank 0's ParallelRunner sends the other ranks
// (parallel_runner.h), as bytes. Fixed-width host-order fields: every rank is the same binary.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/forward_batch.h"
#include "runtime/model_runner.h"

namespace inflight {

enum class RunnerCommand : uint8_t {
  kReserveWorkspace = 1,  // a: max_num_batched_tokens, b: max_num_seqs
  kMemory,                // every rank reports its free memory (World::min_over_ranks)
  kKvBytesPerBlock,       // a: block_size; every rank reports its bytes per block (the most)
  kInitKvCache,           // a: num_blocks, b: block_size
  kStep,                  // batch, request
  kStop,
};

struct RunnerMessage {
  RunnerCommand command = RunnerCommand::kStop;
  int64_t a = 0;
  int64_t b = 0;
  ForwardBatch batch;
  LogitsRequest request;
};

// A command other than a step, with its arguments.
std::vector<uint8_t> encode(RunnerCommand command, int64_t a = 0, int64_t b = 0);
// A step, straight from the caller's batch and request.
std::vector<uint8_t> encode_step(const ForwardBatch& batch, const LogitsRequest& request);
// Throws Error(kInternal) for bytes that are not a whole message.
RunnerMessage decode(const std::vector<uint8_t>& bytes);

}  // namespace inflight
