// Communicator: the collectives among the ranks that hold the shards of one model (tensor and
// pipeline parallelism), on device tensors of each rank's backend, enqueued in the backend's
// stream order and capturable in graphs. A model written against it runs unchanged on one rank
// (SingleRankCommunicator, where every collective is the identity) and on many (NCCL between
// GPUs, MPI between CPU processes: the tensor-parallel implementations plug in here).
//
// Shapes: all_gather and reduce_scatter work along the first dimension; `out` of all_gather is
// world_size() times `in`, `in` of reduce_scatter world_size() times `out`.
// Every rank of a group calls the same collectives in the same order. all_reduce leaves the same
// bits on every rank (the ranks' activations must not drift apart).
#pragma once

#include <memory>

#include "core/tensor.h"
#include "runtime/backend.h"

namespace inflight {

enum class ReduceOp { kSum, kMax };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // t = op over every rank's t (in place).
  virtual void all_reduce(const Tensor& t, ReduceOp op) = 0;
  // out = the ranks' `in`, concatenated in rank order.
  virtual void all_gather(const Tensor& in, const Tensor& out) = 0;
  // out = this rank's slice of the sum over ranks of `in`.
  virtual void reduce_scatter(const Tensor& in, const Tensor& out) = 0;
  // t = root's t on every rank.
  virtual void broadcast(const Tensor& t, int root) = 0;
  // Point to point (pipeline stages): t goes to / comes from rank `peer`.
  virtual void send(const Tensor& t, int peer) = 0;
  virtual void recv(const Tensor& t, int peer) = 0;
};

// How one rank's model is split: the tensor-parallel group that splits each of its layers, and
// the pipeline whose stages split the layers (rank s of `pp` is stage s, first to last). Null:
// one rank, one stage.
struct ModelParallelism {
  Communicator* tp = nullptr;
  Communicator* pp = nullptr;
};

// The one rank of a model that is not sharded.
class SingleRankCommunicator final : public Communicator {
 public:
  explicit SingleRankCommunicator(Backend& backend) : backend_(backend) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce(const Tensor&, ReduceOp) override {}
  void all_gather(const Tensor& in, const Tensor& out) override;
  void reduce_scatter(const Tensor& in, const Tensor& out) override;
  void broadcast(const Tensor& t, int root) override;
  // Throw Error(kInvalidArgument): a single rank has no peer.
  void send(const Tensor& t, int peer) override;
  void recv(const Tensor& t, int peer) override;

 private:
  Backend& backend_;
};

}  // namespace inflight
