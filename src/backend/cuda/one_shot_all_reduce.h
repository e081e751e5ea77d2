// OneShotAllReduce: an all-reduce of small messages between the GPUs of one node, over CUDA IPC
// peer memory, in one kernel: each rank copies its tensor into a buffer every rank can read,
// meets the others at a flag barrier, then reads every rank's buffer and sums them in rank
// order (the same bits on every rank). One launch and one barrier instead of NCCL's protocol:
// a few microseconds for the 8 KiB to 1 MiB all-reduces of decode steps, where NCCL takes ~7.
//
// Layout of each rank's IPC allocation: flags [kMaxBlocks][kMaxRanks] u32 (flags[b][q]: the
// epoch rank q reached in block b), two data halves of `capacity` bytes, then the push kernel's
// three receive buffers of `size` x `push_capacity` bytes. An all-reduce of the barrier kernel uses
// the data half of its epoch's parity, so a rank one all-reduce ahead never overwrites what a
// slower rank still reads: it cannot be two ahead, having passed the barrier of the one between.
// Epochs count on the device (per block; every launch has all kMaxBlocks blocks, so they
// advance together), so a captured graph replays right.
// bf16 all-reduces of up to `push_capacity` bytes take a second kernel without the barrier and
// the remote reads: each rank pushes its data into every peer's receive buffer, whose empty
// marker doubles as the flag (layout and invariants in the .cu).
// The kernels are enqueued on the caller's stream and captured in graphs like any other.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace inflight {

class OneShotAllReduce {
 public:
  static constexpr int kMaxRanks = 8;
  static constexpr int kMaxBlocks = 64;

  // Per block of the push kernel: the receive buffer (0..2) of the last all-reduce and the
  // 16-byte units each buffer held at its last use.
  struct PushBlock {
    uint32_t buffer;
    uint32_t n[3];
  };

  // Sets up rank `rank` of `size` on CUDA device `device`: allocates its buffers (all-reduces of
  // up to `capacity` bytes, bf16 ones of up to `push_capacity` <= capacity pushed; 0: none) and
  // opens every peer's. `all_gather(bytes)` returns every rank's bytes (equal sizes), in rank
  // order: the exchange of IPC handles. Returns null when the ranks cannot share memory (other
  // hosts, no peer access between two of the GPUs, more than kMaxRanks ranks); every rank gets the
  // same answer.
  static std::unique_ptr<OneShotAllReduce> create(
      int device, int rank, int size, int64_t capacity, int64_t push_capacity,
      const std::function<std::vector<uint8_t>(const std::vector<uint8_t>&)>& all_gather);
  ~OneShotAllReduce();
  OneShotAllReduce(const OneShotAllReduce&) = delete;
  OneShotAllReduce& operator=(const OneShotAllReduce&) = delete;

  // Whether it takes `t` (bf16 or f32, a whole number of 16-byte units, at most capacity).
  bool takes(const Tensor& t) const;
  // t = the sum over ranks of t, in place, on `stream`.
  void run(const Tensor& t, cudaStream_t stream);

 private:
  OneShotAllReduce() = default;

  int rank_ = 0;
  int size_ = 1;
  int64_t capacity_ = 0;
  int64_t push_capacity_ = 0;
  void* local_ = nullptr;            // this rank's IPC allocation
  uint32_t* counters_ = nullptr;     // [kMaxBlocks] epochs of this rank's blocks
  PushBlock* push_state_ = nullptr;  // [kMaxBlocks]
  std::vector<void*> peers_;         // every rank's allocation, mapped here (this rank's: local_)
};

}  // namespace inflight
