#include "backend/cuda/nccl_communicator.h"

#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/cuda/one_shot_all_reduce.h"
#include "core/check.h"
#include "ops/cuda_check.h"

namespace inflight {
namespace {

// libnccl.so.2, opened on first use: serving on one GPU never needs it, and the library (a few
// hundred MB) comes with the CUDA installation of the machines that run several GPUs.
struct Nccl {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclGetErrorString) error_string;
  decltype(&ncclGetLastError) last_error;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclAllGather) all_gather;
  decltype(&ncclReduceScatter) reduce_scatter;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
};

const Nccl& nccl() {
  static const Nccl lib = [] {
    void* h = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
    INFLIGHT_CHECK_CODE(h != nullptr, ErrorCode::kUnsupported,
                        "tensor parallelism on CUDA needs NCCL: cannot load libnccl.so.2 ({}); "
                        "add its directory to LD_LIBRARY_PATH",
                        ::dlerror());
    auto sym = [h](const char* name) {
      void* f = ::dlsym(h, name);
      INFLIGHT_CHECK_CODE(f != nullptr, ErrorCode::kUnsupported, "libnccl.so.2 lacks {}", name);
      return f;
    };
    Nccl n;
    n.get_unique_id = reinterpret_cast<decltype(n.get_unique_id)>(sym("ncclGetUniqueId"));
    n.comm_init_rank = reinterpret_cast<decltype(n.comm_init_rank)>(sym("ncclCommInitRank"));
    n.comm_destroy = reinterpret_cast<decltype(n.comm_destroy)>(sym("ncclCommDestroy"));
    n.error_string = reinterpret_cast<decltype(n.error_string)>(sym("ncclGetErrorString"));
    n.last_error = reinterpret_cast<decltype(n.last_error)>(sym("ncclGetLastError"));
    n.all_reduce = reinterpret_cast<decltype(n.all_reduce)>(sym("ncclAllReduce"));
    n.all_gather = reinterpret_cast<decltype(n.all_gather)>(sym("ncclAllGather"));
    n.reduce_scatter = reinterpret_cast<decltype(n.reduce_scatter)>(sym("ncclReduceScatter"));
    n.broadcast = reinterpret_cast<decltype(n.broadcast)>(sym("ncclBroadcast"));
    n.send = reinterpret_cast<decltype(n.send)>(sym("ncclSend"));
    n.recv = reinterpret_cast<decltype(n.recv)>(sym("ncclRecv"));
    return n;
  }();
  return lib;
}

#define INFLIGHT_NCCL_CHECK(call)                                                             \
  do {                                                                                        \
    const ncclResult_t _r = (call);                                                           \
    INFLIGHT_CHECK_CODE(_r == ncclSuccess, ErrorCode::kInternal, "{} failed: {} ({})", #call, \
                        nccl().error_string(_r), nccl().last_error(nullptr));                 \
  } while (0)

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    case DType::kI32:
      return ncclInt32;
    default:
      break;
  }
  INFLIGHT_THROW(ErrorCode::kUnsupported, "NCCL collectives on {} tensors are not supported",
                 dtype_name(dtype));
}

// All-reduces of up to this many bytes take the one-shot kernel where the ranks share memory
// (INFLIGHT_ONE_SHOT_ALL_REDUCE_MAX; 0: NCCL only). Each rank reads every peer's whole buffer,
// so the one-shot's cost grows with size - 1 while NCCL's ring/tree does not: by default 2 MiB /
// size, where it stopped winning on H100s over NVLink (2 ranks: ahead through 1 MiB; 4 ranks:
// through 512 KiB, behind at 1 MiB; bench/results/collectives-allreduce-tp*.json).
int64_t one_shot_max_bytes(int size) {
  const char* v = std::getenv("INFLIGHT_ONE_SHOT_ALL_REDUCE_MAX");
  return v != nullptr && *v != '\0' ? std::atoll(v) : (int64_t{2} << 20) / size;
}

// bf16 all-reduces of up to this many bytes (and at most the one-shot's) push their data into the
// peers' buffers instead of meeting at a barrier (INFLIGHT_PUSH_ALL_REDUCE_MAX; 0: never): every
// all-reduce of a decode step up to 512 KiB (batch 64 of a 4,096-wide model).
int64_t push_max_bytes(int64_t one_shot_bytes) {
  const char* v = std::getenv("INFLIGHT_PUSH_ALL_REDUCE_MAX");
  const int64_t bytes = v != nullptr && *v != '\0' ? std::atoll(v) : int64_t{512} << 10;
  return std::min(bytes, one_shot_bytes) / 16 * 16;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int device, std::function<cudaStream_t()> stream, int rank, int size,
                   ncclComm_t comm)
      : stream_(std::move(stream)), rank_(rank), size_(size), comm_(comm) {
    const int64_t max_bytes = one_shot_max_bytes(size) / 16 * 16;
    if (size_ > 1 && max_bytes >= 16) {
      one_shot_ = OneShotAllReduce::create(
          device, rank, size, max_bytes, push_max_bytes(max_bytes),
          [this](const std::vector<uint8_t>& bytes) { return all_gather_host(bytes); });
    }
  }
  ~NcclCommunicator() override {
    if (comm_ != nullptr) nccl().comm_destroy(comm_);  // errors ignored in a destructor
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }

  void all_reduce(const Tensor& t, ReduceOp op) override {
    if (one_shot_ != nullptr && op == ReduceOp::kSum && one_shot_->takes(t)) {
      one_shot_->run(t, stream_());
      return;
    }
    INFLIGHT_NCCL_CHECK(
        nccl().all_reduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                          op == ReduceOp::kSum ? ncclSum : ncclMax, comm_, stream_()));
  }
  void all_gather(const Tensor& in, const Tensor& out) override {
    check_parts("all_gather", in, out);
    INFLIGHT_NCCL_CHECK(nccl().all_gather(in.raw(), out.raw(), static_cast<size_t>(in.numel()),
                                          nccl_type(in.dtype()), comm_, stream_()));
  }
  void reduce_scatter(const Tensor& in, const Tensor& out) override {
    check_parts("reduce_scatter", out, in);
    INFLIGHT_NCCL_CHECK(nccl().reduce_scatter(in.raw(), out.raw(), static_cast<size_t>(out.numel()),
                                              nccl_type(in.dtype()), ncclSum, comm_, stream_()));
  }
  void broadcast(const Tensor& t, int root) override {
    INFLIGHT_NCCL_CHECK(nccl().broadcast(t.raw(), t.raw(), static_cast<size_t>(t.numel()),
                                         nccl_type(t.dtype()), root, comm_, stream_()));
  }
  void send(const Tensor& t, int peer) override {
    INFLIGHT_NCCL_CHECK(nccl().send(t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                                    peer, comm_, stream_()));
  }
  void recv(const Tensor& t, int peer) override {
    INFLIGHT_NCCL_CHECK(nccl().recv(t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                                    peer, comm_, stream_()));
  }

 private:
  // Every rank's `bytes` (equal sizes), in rank order, through NCCL (set-up only: waits).
  std::vector<uint8_t> all_gather_host(const std::vector<uint8_t>& bytes) {
    const size_t n = bytes.size();
    void* dev = nullptr;
    INFLIGHT_CUDA_CHECK(cudaMalloc(&dev, n * static_cast<size_t>(size_ + 1)));
    char* all = static_cast<char*>(dev) + n;
    cudaStream_t s = stream_();
    INFLIGHT_CUDA_CHECK(cudaMemcpyAsync(dev, bytes.data(), n, cudaMemcpyHostToDevice, s));
    INFLIGHT_NCCL_CHECK(nccl().all_gather(dev, all, n, ncclUint8, comm_, s));
    std::vector<uint8_t> out(n * static_cast<size_t>(size_));
    INFLIGHT_CUDA_CHECK(cudaMemcpyAsync(out.data(), all, out.size(), cudaMemcpyDeviceToHost, s));
    INFLIGHT_CUDA_CHECK(cudaStreamSynchronize(s));
    cudaFree(dev);
    return out;
  }

  // `whole` holds world_size() parts of `part`'s size and dtype.
  void check_parts(const char* op, const Tensor& part, const Tensor& whole) const {
    INFLIGHT_CHECK_CODE(part.dtype() == whole.dtype() && whole.numel() == part.numel() * size_,
                        ErrorCode::kInvalidArgument,
                        "{}: {} elements of {} against {} of {} on {} ranks", op, part.numel(),
                        dtype_name(part.dtype()), whole.numel(), dtype_name(whole.dtype()), size_);
  }

  std::function<cudaStream_t()> stream_;
  int rank_, size_;
  ncclComm_t comm_;
  std::unique_ptr<OneShotAllReduce> one_shot_;  // small all-reduces (null: NCCL only)
};

}  // namespace

std::vector<uint8_t> nccl_unique_id() {
  ncclUniqueId id;
  INFLIGHT_NCCL_CHECK(nccl().get_unique_id(&id));
  std::vector<uint8_t> bytes(sizeof(id.internal));
  std::memcpy(bytes.data(), id.internal, bytes.size());
  return bytes;
}

std::unique_ptr<Communicator> make_nccl_communicator(int device,
                                                     std::function<cudaStream_t()> stream, int rank,
                                                     int size, const std::vector<uint8_t>& id) {
  ncclUniqueId uid;
  INFLIGHT_CHECK_CODE(id.size() == sizeof(uid.internal), ErrorCode::kInvalidArgument,
                      "an NCCL id is {} bytes, got {}", sizeof(uid.internal), id.size());
  std::memcpy(uid.internal, id.data(), id.size());
  ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  INFLIGHT_CUDA_CHECK(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  INFLIGHT_NCCL_CHECK(nccl().comm_init_rank(&comm, size, uid, rank));
  return std::make_unique<NcclCommunicator>(device, std::move(stream), rank, size, comm);
}

}  // namespace inflight
