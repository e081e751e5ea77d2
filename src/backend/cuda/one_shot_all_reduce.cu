#include "backend/cuda/one_shot_all_reduce.h"

#include <cuda_bf16.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "ops/cuda_check.h"
#include "ops/cuda_common.cuh"

namespace inflight {
namespace {

constexpr int kThreads = 512;
constexpr int64_t kFlagBytes = 4096;  // flags [kMaxBlocks][kMaxRanks] u32, padded

// What both kernels take: every rank's buffers of the kernel, mapped here, and this rank's
// tensor.
struct Ranks {
  char* peers[OneShotAllReduce::kMaxRanks];
  uint4* t;  // [n] 16-byte units, in place
  int64_t n;
  int rank;
  int size;
};

struct Args : Ranks {
  uint32_t* counters;  // this rank's, [kMaxBlocks]
  int64_t capacity;
};

__device__ __forceinline__ void store_release(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// 16 bytes of `T` summed into f32 accumulators, and back.
template <typename T>
struct Unit;
template <>
struct Unit<float> {
  static constexpr int kN = 4;
  static __device__ void add(float* acc, uint4 u) {
    acc[0] += __uint_as_float(u.x);
    acc[1] += __uint_as_float(u.y);
    acc[2] += __uint_as_float(u.z);
    acc[3] += __uint_as_float(u.w);
  }
  static __device__ uint4 pack(const float* acc) {
    return {__float_as_uint(acc[0]), __float_as_uint(acc[1]), __float_as_uint(acc[2]),
            __float_as_uint(acc[3])};
  }
};
template <>
struct Unit<__nv_bfloat16> {
  static constexpr int kN = 8;
  static __device__ void add(float* acc, uint4 u) {
    const auto* h = reinterpret_cast<const __nv_bfloat162*>(&u);
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      acc[2 * i] += f.x;
      acc[2 * i + 1] += f.y;
    }
  }
  static __device__ uint4 pack(const float* acc) {
    uint4 u;
    auto* h = reinterpret_cast<__nv_bfloat162*>(&u);
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
    return u;
  }
};

// Block b handles units b * kThreads + tid, stepping by the grid (always kMaxBlocks blocks): the
// same units on every rank, so block b only waits for block b of the others.
template <typename T>
__global__ void __launch_bounds__(kThreads) one_shot_kernel(Args a) {
  cuda::pdl_wait();  // launched with PDL: t is the previous kernel's output
  cuda::pdl_launch_dependents();
  __shared__ uint32_t epoch;
  const int b = blockIdx.x;
  if (threadIdx.x == 0) {
    epoch = a.counters[b] + 1;
    a.counters[b] = epoch;
  }
  __syncthreads();
  const int64_t half = kFlagBytes + (epoch & 1) * a.capacity;
  auto* mine = reinterpret_cast<uint4*>(a.peers[a.rank] + half);
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  for (int64_t i = int64_t{b} * kThreads + threadIdx.x; i < a.n; i += stride) mine[i] = a.t[i];
  __syncthreads();
  if (threadIdx.x < a.size) {
    // Tell rank q this block's data is in place; wait until rank q says the same.
    const int q = threadIdx.x;
    auto* theirs = reinterpret_cast<uint32_t*>(a.peers[q]);
    store_release(theirs + b * OneShotAllReduce::kMaxRanks + a.rank, epoch);
    const auto* own = reinterpret_cast<const uint32_t*>(a.peers[a.rank]);
    // Rank q may already be one all-reduce further (epoch + 1); epochs wrap around 2^32, so
    // compare them as serial numbers.
    while (static_cast<int32_t>(load_acquire(own + b * OneShotAllReduce::kMaxRanks + q) - epoch) <
           0) {
    }
  }
  __syncthreads();
  for (int64_t i = int64_t{b} * kThreads + threadIdx.x; i < a.n; i += stride) {
    float acc[Unit<T>::kN] = {};
    for (int q = 0; q < a.size; ++q) {  // rank order: the same sum on every rank
      Unit<T>::add(acc, __ldcg(reinterpret_cast<const uint4*>(a.peers[q] + half) + i));
    }
    a.t[i] = Unit<T>::pack(acc);
  }
}

// Push mode (bf16 only): no barrier and no remote reads. Each rank stores its data straight into
// slot `rank` of every peer's receive buffer and sums its own buffer once no element of it is
// the empty marker any more (bf16 -0.0; a -0.0 of the data is sent as +0.0, the same on every
// rank, so the sums stay bit-identical across ranks). Three receive buffers rotate, so that a
// buffer is marked empty again (by its owner, over the units it held) one all-reduce after its
// use and two before its next: a peer reaches the all-reduce that writes it again only after this
// rank has sent the data of the all-reduce in between, which it does after the marking.
// Each receive buffer holds `size` slots of `push_capacity` bytes, slot q written by rank q.
constexpr uint32_t kEmpty = 0x80008000u;  // two bf16 -0.0

// Where the push buffers start in a rank's allocation: after the flags and the two data halves.
int64_t push_offset(int64_t capacity) {
  return kFlagBytes + 2 * capacity;
}

struct PushArgs : Ranks {
  OneShotAllReduce::PushBlock* state;  // this rank's, [kMaxBlocks]
  int64_t slot;                        // bytes of one slot (push_capacity)
};

__device__ __forceinline__ void store_volatile(uint4* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint4 load_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
// Whether either bf16 of `w` is the marker.
__device__ __forceinline__ bool has_empty(uint32_t w) {
  return (w & 0xffffu) == 0x8000u || (w >> 16) == 0x8000u;
}
// -0.0 to +0.0 in each bf16 of `w`.
__device__ __forceinline__ uint32_t no_negative_zero(uint32_t w) {
  if ((w & 0xffffu) == 0x8000u) w &= 0xffff0000u;
  if ((w >> 16) == 0x8000u) w &= 0x0000ffffu;
  return w;
}
// Eight bf16 as this rank sends them (and sums its own): never the marker.
__device__ __forceinline__ uint4 outgoing(uint4 u) {
  return {no_negative_zero(u.x), no_negative_zero(u.y), no_negative_zero(u.z),
          no_negative_zero(u.w)};
}

// Block b handles units b * kThreads + tid, stepping by the grid (always kMaxBlocks blocks, so
// every block's buffer index advances with every all-reduce).
__global__ void __launch_bounds__(kThreads) push_kernel(PushArgs a) {
  cuda::pdl_wait();  // launched with PDL: t is the previous kernel's output
  cuda::pdl_launch_dependents();
  __shared__ uint32_t buffer, previous_n;
  const int b = blockIdx.x;
  if (threadIdx.x == 0) {
    OneShotAllReduce::PushBlock& st = a.state[b];
    const uint32_t previous = st.buffer;
    previous_n = st.n[previous];
    buffer = (previous + 1) % 3;
    st.buffer = buffer;
    st.n[buffer] = static_cast<uint32_t>(a.n);
  }
  __syncthreads();
  const int64_t slots = int64_t{a.size} * a.slot;  // bytes of one buffer
  const auto unit = [&](char* base, uint32_t k, int q, int64_t i) {
    return reinterpret_cast<uint4*>(base + k * slots + q * a.slot) + i;
  };
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t first = int64_t{b} * kThreads + threadIdx.x;
  // 1. Push this rank's units into every peer.
  for (int64_t i = first; i < a.n; i += stride) {
    const uint4 u = outgoing(a.t[i]);
    for (int q = 0; q < a.size; ++q) {
      if (q != a.rank) store_volatile(unit(a.peers[q], buffer, a.rank, i), u);
    }
  }
  // 2. Mark the previous all-reduce's buffer empty again (every peer has filled it: this rank
  // summed it), over the units this block held then.
  char* own = a.peers[a.rank];
  const uint32_t previous = (buffer + 2) % 3;
  const uint4 empty{kEmpty, kEmpty, kEmpty, kEmpty};
  for (int64_t i = first; i < previous_n; i += stride) {
    for (int q = 0; q < a.size; ++q) {
      if (q != a.rank) *unit(own, previous, q, i) = empty;
    }
  }
  // 3. Wait for each peer's unit and sum in rank order: the same sum on every rank.
  for (int64_t i = first; i < a.n; i += stride) {
    float acc[8] = {};
    for (int q = 0; q < a.size; ++q) {
      uint4 u;
      if (q == a.rank) {
        u = outgoing(a.t[i]);
      } else {
        const uint4* p = unit(own, buffer, q, i);
        do {
          u = load_volatile(p);
        } while (has_empty(u.x) || has_empty(u.y) || has_empty(u.z) || has_empty(u.w));
      }
      Unit<__nv_bfloat16>::add(acc, u);
    }
    a.t[i] = Unit<__nv_bfloat16>::pack(acc);
  }
}

__global__ void fill_empty_kernel(uint32_t* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    p[i] = kEmpty;
  }
}

// This host, so that ranks on other nodes never try to share memory.
std::vector<uint8_t> host_key() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return std::vector<uint8_t>(name, name + sizeof(name));
}

}  // namespace

std::unique_ptr<OneShotAllReduce> OneShotAllReduce::create(
    int device, int rank, int size, int64_t capacity, int64_t push_capacity,
    const std::function<std::vector<uint8_t>(const std::vector<uint8_t>&)>& all_gather) {
  INFLIGHT_CUDA_CHECK(cudaSetDevice(device));
  // One record per rank: host, device id, whether it reaches every other rank's device
  // (checked below), its IPC handle.
  struct Record {
    uint8_t host[256];
    int32_t device;
    int32_t ok;
    cudaIpcMemHandle_t handle;
  };
  auto r = std::unique_ptr<OneShotAllReduce>(new OneShotAllReduce());
  r->rank_ = rank;
  r->size_ = size;
  r->capacity_ = capacity;
  r->push_capacity_ = push_capacity;
  Record mine{};
  const std::vector<uint8_t> key = host_key();
  std::memcpy(mine.host, key.data(), sizeof(mine.host));
  mine.device = device;
  mine.ok = size <= kMaxRanks;
  if (mine.ok) {
    const int64_t push_bytes = 3 * size * push_capacity;
    INFLIGHT_CUDA_CHECK(
        cudaMalloc(&r->local_, static_cast<size_t>(push_offset(capacity) + push_bytes)));
    INFLIGHT_CUDA_CHECK(cudaMemset(r->local_, 0, kFlagBytes));
    INFLIGHT_CUDA_CHECK(cudaMalloc(&r->counters_, kMaxBlocks * sizeof(uint32_t)));
    INFLIGHT_CUDA_CHECK(cudaMemset(r->counters_, 0, kMaxBlocks * sizeof(uint32_t)));
    INFLIGHT_CUDA_CHECK(cudaMalloc(&r->push_state_, kMaxBlocks * sizeof(PushBlock)));
    INFLIGHT_CUDA_CHECK(cudaMemset(r->push_state_, 0, kMaxBlocks * sizeof(PushBlock)));
    if (push_bytes > 0) {
      fill_empty_kernel<<<256, 256>>>(
          reinterpret_cast<uint32_t*>(static_cast<char*>(r->local_) + push_offset(capacity)),
          push_bytes / 4);
      INFLIGHT_CUDA_CHECK_LAUNCH();
    }
    INFLIGHT_CUDA_CHECK(cudaDeviceSynchronize());
    INFLIGHT_CUDA_CHECK(cudaIpcGetMemHandle(&mine.handle, r->local_));
  }
  auto gather = [&](const Record& x) {
    const std::vector<uint8_t> bytes(reinterpret_cast<const uint8_t*>(&x),
                                     reinterpret_cast<const uint8_t*>(&x) + sizeof(Record));
    const std::vector<uint8_t> all = all_gather(bytes);
    std::vector<Record> records(static_cast<size_t>(size));
    std::memcpy(records.data(), all.data(), records.size() * sizeof(Record));
    return records;
  };
  std::vector<Record> records = gather(mine);
  // Peer access to every other rank's device, all on this host: then each rank opens the rest.
  for (const Record& x : records) {
    int access = 1;
    if (x.device != device) cudaDeviceCanAccessPeer(&access, device, x.device);
    mine.ok = mine.ok && x.ok && access == 1 && std::memcmp(x.host, mine.host, 256) == 0;
  }
  records = gather(mine);  // every rank's verdict, so that all agree
  const bool usable =
      std::all_of(records.begin(), records.end(), [](const Record& x) { return x.ok != 0; });
  if (!usable) return nullptr;  // the destructor frees what was allocated
  r->peers_.resize(static_cast<size_t>(size));
  for (int q = 0; q < size; ++q) {
    if (q == rank) {
      r->peers_[static_cast<size_t>(q)] = r->local_;
      continue;
    }
    INFLIGHT_CUDA_CHECK(cudaIpcOpenMemHandle(&r->peers_[static_cast<size_t>(q)],
                                             records[static_cast<size_t>(q)].handle,
                                             cudaIpcMemLazyEnablePeerAccess));
  }
  return r;
}

OneShotAllReduce::~OneShotAllReduce() {
  for (size_t q = 0; q < peers_.size(); ++q) {
    if (static_cast<int>(q) != rank_ && peers_[q] != nullptr) cudaIpcCloseMemHandle(peers_[q]);
  }
  if (local_ != nullptr) cudaFree(local_);
  if (counters_ != nullptr) cudaFree(counters_);
  if (push_state_ != nullptr) cudaFree(push_state_);
}

bool OneShotAllReduce::takes(const Tensor& t) const {
  const int64_t bytes = static_cast<int64_t>(t.nbytes());
  return (t.dtype() == DType::kBF16 || t.dtype() == DType::kF32) && bytes % 16 == 0 &&
         bytes <= capacity_ && reinterpret_cast<uintptr_t>(t.raw()) % 16 == 0;
}

void OneShotAllReduce::run(const Tensor& t, cudaStream_t stream) {
  const auto bytes = static_cast<int64_t>(t.nbytes());
  if (bytes == 0) return;
  // The kernel's buffers start `offset` bytes into each rank's allocation.
  const auto ranks = [&](int64_t offset) {
    Ranks r{};
    for (int q = 0; q < size_; ++q) {
      r.peers[q] = static_cast<char*>(peers_[static_cast<size_t>(q)]) + offset;
    }
    r.t = static_cast<uint4*>(t.raw());
    r.n = bytes / 16;
    r.rank = rank_;
    r.size = size_;
    return r;
  };
  if (t.dtype() == DType::kBF16 && bytes <= push_capacity_) {
    const PushArgs a{ranks(push_offset(capacity_)), push_state_, push_capacity_};
    cuda::launch_pdl(push_kernel, kMaxBlocks, kThreads, 0, stream, a);
    return;
  }
  const Args a{ranks(0), counters_, capacity_};
  // Always kMaxBlocks blocks: every block's epoch then advances with every all-reduce, so all
  // blocks of one all-reduce use the same data half.
  if (t.dtype() == DType::kBF16) {
    cuda::launch_pdl(one_shot_kernel<__nv_bfloat16>, kMaxBlocks, kThreads, 0, stream, a);
  } else {
    cuda::launch_pdl(one_shot_kernel<float>, kMaxBlocks, kThreads, 0, stream, a);
  }
}

}  // namespace inflight
