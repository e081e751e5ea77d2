// NcclCommunicator: the Communicator (runtime/communicator.h) of CUDA ranks, over NCCL.
//
// Collectives are enqueued on the backend's current stream (the stream getter), so they order
// with the step's kernels and are recorded into CUDA graphs like them. NVLink SHARP (NVLS,
// multicast) stays off unless NCCL_NVLS_ENABLE is set: it reserves memory on every rank and is
// not available on every machine. libnccl.so.2 is opened on first use (a machine that serves on
// one GPU needs none).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/communicator.h"

namespace inflight {

// A fresh NCCL unique id (ncclGetUniqueId), made once on a group's first rank.
std::vector<uint8_t> nccl_unique_id();

// Rank `rank` of `size` of the NCCL group `id` names, on CUDA device `device`; collectives go to
// stream(). Blocks until every rank has joined. Throws Error(kInternal) naming NCCL's error.
std::unique_ptr<Communicator> make_nccl_communicator(int device,
                                                     std::function<cudaStream_t()> stream, int rank,
                                                     int size, const std::vector<uint8_t>& id);

}  // namespace inflight
