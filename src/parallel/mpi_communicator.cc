#include "parallel/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <vector>

#include "core/check.h"

namespace inflight {
namespace {

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm group) {
    MPI_Comm_dup(group, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }

  void all_reduce(const Tensor& t, ReduceOp op) override {
    check_host("all_reduce", t);
    INFLIGHT_CHECK_CODE(t.dtype() == DType::kF32, ErrorCode::kUnsupported,
                        "all_reduce over MPI: f32 tensors only, got {}", dtype_name(t.dtype()));
    const int64_t n = t.numel();
    gathered_.resize(static_cast<size_t>(n * size_));
    MPI_Allgather(t.raw(), static_cast<int>(n), MPI_FLOAT, gathered_.data(), static_cast<int>(n),
                  MPI_FLOAT, comm_);
    // In rank order on every rank: the same bits everywhere.
    auto* out = t.data<float>();
    const float* g = gathered_.data();
    std::copy_n(g, n, out);
    for (int r = 1; r < size_; ++r) {
      const float* part = g + int64_t{r} * n;
      if (op == ReduceOp::kSum) {
        for (int64_t i = 0; i < n; ++i) out[i] += part[i];
      } else {
        for (int64_t i = 0; i < n; ++i) out[i] = std::max(out[i], part[i]);
      }
    }
  }
  void all_gather(const Tensor& in, const Tensor& out) override {
    check_parts("all_gather", in, out);
    MPI_Allgather(in.raw(), static_cast<int>(in.nbytes()), MPI_BYTE, out.raw(),
                  static_cast<int>(in.nbytes()), MPI_BYTE, comm_);
  }
  void reduce_scatter(const Tensor& in, const Tensor& out) override {
    check_parts("reduce_scatter", out, in);
    // The whole sum on every rank (as all_reduce: rank order), then this rank's part.
    Tensor sum = Tensor::empty(in.shape(), in.dtype());
    std::copy_n(static_cast<const uint8_t*>(in.raw()), in.nbytes(),
                static_cast<uint8_t*>(sum.raw()));
    all_reduce(sum, ReduceOp::kSum);
    const int64_t part = out.numel();
    std::copy_n(sum.data<float>() + rank_ * part, part, out.data<float>());
  }
  void broadcast(const Tensor& t, int root) override {
    check_host("broadcast", t);
    MPI_Bcast(t.raw(), static_cast<int>(t.nbytes()), MPI_BYTE, root, comm_);
  }
  void send(const Tensor& t, int peer) override {
    check_host("send", t);
    MPI_Send(t.raw(), static_cast<int>(t.nbytes()), MPI_BYTE, peer, kTensorTag, comm_);
  }
  void recv(const Tensor& t, int peer) override {
    check_host("recv", t);
    MPI_Recv(t.raw(), static_cast<int>(t.nbytes()), MPI_BYTE, peer, kTensorTag, comm_,
             MPI_STATUS_IGNORE);
  }

 private:
  static constexpr int kTensorTag = 7002;

  void check_host(const char* op, const Tensor& t) const {
    INFLIGHT_CHECK_CODE(t.device() == Device::kCpu, ErrorCode::kInvalidArgument,
                        "{} over MPI needs host tensors", op);
    INFLIGHT_CHECK_CODE(t.nbytes() <= static_cast<size_t>(INT32_MAX) / static_cast<size_t>(size_),
                        ErrorCode::kUnsupported, "{} over MPI: {} bytes is too large", op,
                        t.nbytes());
  }
  // `whole` holds world_size() parts of `part`'s size and dtype.
  void check_parts(const char* op, const Tensor& part, const Tensor& whole) const {
    check_host(op, part);
    check_host(op, whole);
    INFLIGHT_CHECK_CODE(part.dtype() == whole.dtype() && whole.numel() == part.numel() * size_,
                        ErrorCode::kInvalidArgument,
                        "{}: {} elements of {} against {} of {} on {} ranks", op, part.numel(),
                        dtype_name(part.dtype()), whole.numel(), dtype_name(whole.dtype()), size_);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<float> gathered_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(Backend& backend, MPI_Comm group) {
  INFLIGHT_CHECK_CODE(backend.device() == Device::kCpu, ErrorCode::kUnsupported,
                      "MPI collectives need the CPU backend (the {} backend has its own)",
                      backend.name());
  return std::make_unique<MpiCommunicator>(group);
}

}  // namespace inflight
