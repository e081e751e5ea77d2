// make_backend: the backend for a device name, for tools and tests that let the user choose.
//
//   "auto"           CUDA device 0 when cuda_device_available(), else the CPU
//   "cpu"            the fp32 reference backend
//   "cuda", "cuda:N" CUDA device N (0 by default)
//
// Throws Error(kInvalidArgument) for an unknown name, Error(kUnsupported) for "cuda" in a build
// without the CUDA backend or on a machine without a device.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "runtime/backend.h"

namespace inflight {

struct BackendOptions {
  // CUDA only: bitwise batch-invariant GEMMs (backend/cuda/cuda_backend.h). Slow.
  bool batch_invariant = false;
  // CUDA only: streams the backend owns (Backend::num_streams). The CPU has one.
  int32_t num_streams = 1;
};

std::unique_ptr<Backend> make_backend(std::string_view device, const BackendOptions& options = {});

// The device "auto" resolves to on this machine: "cuda:0" or "cpu"; other names unchanged.
std::string resolve_device(std::string_view device);

// Whether this build has the CUDA backend.
bool cuda_backend_built();

}  // namespace inflight
