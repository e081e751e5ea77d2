#include "runtime/communicator.h"

#include "core/check.h"

namespace inflight {

std::unique_ptr<Communicator> Backend::make_communicator(int, int, const std::vector<uint8_t>&) {
  INFLIGHT_THROW(ErrorCode::kUnsupported, "the {} backend has no device collectives", name());
}

void SingleRankCommunicator::all_gather(const Tensor& in, const Tensor& out) {
  backend_.copy(in, out);  // one rank: the concatenation of one part
}

void SingleRankCommunicator::reduce_scatter(const Tensor& in, const Tensor& out) {
  backend_.copy(in, out);  // one rank: the sum of one term, sliced into one part
}

void SingleRankCommunicator::broadcast(const Tensor&, int root) {
  INFLIGHT_CHECK_CODE(root == 0, ErrorCode::kInvalidArgument, "broadcast from rank {} among 1 rank",
                      root);
}

void SingleRankCommunicator::send(const Tensor&, int peer) {
  INFLIGHT_THROW(ErrorCode::kInvalidArgument, "send to rank {}: a single rank has no peer", peer);
}

void SingleRankCommunicator::recv(const Tensor&, int peer) {
  INFLIGHT_THROW(ErrorCode::kInvalidArgument, "recv from rank {}: a single rank has no peer", peer);
}

}  // namespace inflight
