#include "backend/backend_factory.h"

#include <charconv>

#include "backend/cpu/cpu_backend.h"
#include "core/check.h"
#include "core/logging.h"
#if INFLIGHT_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace inflight {

namespace {

bool cuda_available() {
#if INFLIGHT_WITH_CUDA
  return cuda_device_available();
#else
  return false;
#endif
}

// "cuda" -> 0, "cuda:N" -> N; -1 for anything else.
int cuda_index(std::string_view device) {
  if (device == "cuda") return 0;
  constexpr std::string_view kPrefix = "cuda:";
  if (device.substr(0, kPrefix.size()) != kPrefix) return -1;
  const std::string_view digits = device.substr(kPrefix.size());
  int index = -1;
  const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (err != std::errc() || end != digits.data() + digits.size() || digits.empty()) return -1;
  return index;
}

}  // namespace

bool cuda_backend_built() {
  return INFLIGHT_WITH_CUDA != 0;
}

std::string resolve_device(std::string_view device) {
  if (device == "auto") return cuda_available() ? "cuda:0" : "cpu";
  return std::string(device);
}

std::unique_ptr<Backend> make_backend(std::string_view device, const BackendOptions& options) {
  const std::string name = resolve_device(device);
  if (name == "cpu") return std::make_unique<CpuBackend>();
  const int index = cuda_index(name);
  INFLIGHT_CHECK_CODE(index >= 0, ErrorCode::kInvalidArgument,
                      "unknown device '{}': use auto, cpu, cuda or cuda:N", device);
  INFLIGHT_CHECK_CODE(cuda_backend_built(), ErrorCode::kUnsupported,
                      "device '{}': this build has no CUDA backend (configure with "
                      "-DINFLIGHT_CUDA=ON)",
                      device);
  INFLIGHT_CHECK_CODE(cuda_available(), ErrorCode::kUnsupported,
                      "device '{}': no CUDA device is available on this machine", device);
#if INFLIGHT_WITH_CUDA
  CudaBackendOptions cuda_options;
  cuda_options.batch_invariant = options.batch_invariant;
  cuda_options.num_streams = options.num_streams;
  auto backend = make_cuda_backend(index, cuda_options);
  INFLIGHT_LOG_INFO("backend cuda:{}: {}{}", index, cuda_device_description(index),
                    options.batch_invariant ? ", batch-invariant GEMMs" : "");
  return backend;
#else
  (void)options;
  return nullptr;
#endif
}

}  // namespace inflight
