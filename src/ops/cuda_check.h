// Error checks for CUDA runtime and cuBLASLt calls: every call is wrapped, and a failure throws
// inflight::Error carrying the call's text, the error's name and the source location.
//
//   INFLIGHT_CUDA_CHECK(cudaMemcpyAsync(...));
//   kernel<<<grid, block, 0, stream>>>(params);
//   INFLIGHT_CUDA_CHECK_LAUNCH();
//   INFLIGHT_CUBLAS_CHECK(cublasLtMatmul(...));
//
// NOTE: nvcc 13.0 with -std=c++20 and g++ 12 cannot compile fmt 9's headers unless
// FMT_USE_CONSTEXPR=1 (fmt turns its constexpr support off for __NVCC__, and g++ then rejects
// fmt's own constexpr functions); inflight_core defines it for every CUDA translation unit.
// The value matches what g++ picks for .cc files, so every translation unit sees the same fmt.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>

#include "core/check.h"

namespace inflight::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file,
                                          int line) {
  const ErrorCode code =
      err == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kInternal;
  throw_error(code, file, line,
              std::string(call) + " failed: " + cudaGetErrorName(err) + " (" +
                  cudaGetErrorString(err) + ")");
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call,
                                            const char* file, int line) {
  const ErrorCode code =
      status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::kOutOfMemory : ErrorCode::kInternal;
  throw_error(code, file, line,
              std::string(call) + " failed: " + cublasLtGetStatusName(status) + " (" +
                  cublasLtGetStatusString(status) + ")");
}

}  // namespace inflight::detail

#define INFLIGHT_CUDA_CHECK(call)                                                     \
  do {                                                                                \
    const cudaError_t inflight_err_ = (call);                                         \
    if (inflight_err_ != cudaSuccess) [[unlikely]]                                    \
      ::inflight::detail::throw_cuda_error(inflight_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports a bad launch configuration (and any earlier sticky error).
#define INFLIGHT_CUDA_CHECK_LAUNCH() INFLIGHT_CUDA_CHECK(cudaGetLastError())

#define INFLIGHT_CUBLAS_CHECK(call)                                                        \
  do {                                                                                     \
    const cublasStatus_t inflight_status_ = (call);                                        \
    if (inflight_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                            \
      ::inflight::detail::throw_cublas_error(inflight_status_, #call, __FILE__, __LINE__); \
  } while (0)
