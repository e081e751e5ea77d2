// splitmix64's finaliser: a bijective 64-bit mixer with full avalanche, the one hash behind
// counter-based random numbers (dummy weights, per-request sampling seeds) and prefix-cache
// block hashes. Callable from host and device code.
#pragma once

#include <cstdint>

// Plain g++ compiles this header too: the CUDA qualifiers appear only under nvcc.
#if defined(__CUDACC__)
#define INFLIGHT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define INFLIGHT_HOST_DEVICE inline
#endif

namespace inflight {

INFLIGHT_HOST_DEVICE constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace inflight
