// MpiCommunicator: the Communicator (runtime/communicator.h) of CPU ranks, over MPI on host
// tensors. all_reduce gathers every rank's tensor and sums the parts in rank order on each rank,
// so every rank holds the same bits whatever MPI's reduction algorithm (the ranks' activations
// never drift apart).
#pragma once

#include <mpi.h>

#include <memory>

#include "runtime/backend.h"
#include "runtime/communicator.h"

namespace inflight {

// The ranks of `group` (duplicated: the caller may free it); `backend` must keep its tensors in
// host memory (the CPU backend).
std::unique_ptr<Communicator> make_mpi_communicator(Backend& backend, MPI_Comm group);

}  // namespace inflight
