// The CUDA backend: Backend (backend/backend.h) on one NVIDIA GPU, bf16 weights, activations and
// KV cache, fp32 accumulation; kernels from src/ops/*_cuda.cu, GEMMs through cuBLASLt.
//
// This header has no CUDA includes, so that tools, the engine and tests built by a plain C++
// compiler can create the backend. Everything the backend enqueues runs on its own stream, in
// order; the host waits only in synchronize() (and in upload(), which is load-time). A backend
// made with several streams enqueues on the current one (Backend::set_stream).
#pragma once

#include <memory>
#include <string>

#include "runtime/backend.h"

namespace inflight {

// True when the CUDA runtime finds at least one device. Never throws: on a machine without a
// driver or a GPU it returns false.
bool cuda_device_available();

// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB, driver 13.0, runtime 13.0, cuBLASLt 130100)".
// Throws Error(kInvalidArgument) for a device that does not exist.
std::string cuda_device_description(int device);

struct CudaBackendOptions {
  // Every GEMM on the CUDA-core kernel, whose per-output reduction order does not depend on the
  // batch: a token's logits are then bitwise the same whatever else is in the step (slow; see
  // backend/cuda/cublaslt_gemm.h).
  bool batch_invariant = false;
  // Streams the backend owns (Backend::num_streams); work starts on stream 0.
  int32_t num_streams = 1;
};

// A backend on CUDA device `device` with its own stream, allocator, cuBLASLt handle and
// staging buffers. Throws Error(kInvalidArgument) for a device that does not exist.
std::unique_ptr<Backend> make_cuda_backend(int device = 0, const CudaBackendOptions& options = {});

}  // namespace inflight
