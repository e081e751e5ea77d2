#include "backend/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>

#include "ops/cuda_check.h"

namespace inflight {

std::shared_ptr<CudaAllocator> CudaAllocator::create(int device) {
  return std::shared_ptr<CudaAllocator>(new CudaAllocator(device));
}

CudaAllocator::~CudaAllocator() {
  // Every block in use holds a reference to the allocator, so only cached blocks are left.
  // NOTE: errors are ignored: at process exit the CUDA runtime may already be unloading.
  for (const auto& [size, ptr] : free_) cudaFree(ptr);
}

size_t CudaAllocator::round_up(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{2} << 20, kLargeFrom = size_t{1} << 20;
  if (bytes == 0) return kSmall;
  const size_t unit = bytes < kLargeFrom ? kSmall : kLarge;
  return (bytes + unit - 1) / unit * unit;
}

std::shared_ptr<void> CudaAllocator::allocate(size_t bytes) {
  const size_t rounded = round_up(bytes);
  void* ptr = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = free_.find(rounded);
    if (it != free_.end()) {
      ptr = it->second;
      free_.erase(it);
      bytes_cached_ -= rounded;
    }
  }
  if (ptr == nullptr) {
    cudaError_t err = cudaMalloc(&ptr, rounded);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the error before retrying
      release_cached();
      err = cudaMalloc(&ptr, rounded);
    }
    INFLIGHT_CHECK_CODE(
        err == cudaSuccess,
        err == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kInternal,
        "cudaMalloc of {} bytes on device {} failed: {} ({} bytes in use, {} "
        "cached)",
        rounded, device_, cudaGetErrorString(err), bytes_in_use(), bytes_cached());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    bytes_in_use_ += rounded;
  }
  std::shared_ptr<CudaAllocator> self = shared_from_this();
  return std::shared_ptr<void>(ptr, [self, rounded](void* p) { self->give_back(p, rounded); });
}

void CudaAllocator::give_back(void* ptr, size_t rounded) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  bytes_in_use_ -= rounded;
  bytes_cached_ += rounded;
  free_.emplace(rounded, ptr);
}

void CudaAllocator::release_cached() {
  std::multimap<size_t, void*> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks.swap(free_);
    bytes_cached_ = 0;
  }
  for (const auto& [size, ptr] : blocks) INFLIGHT_CUDA_CHECK(cudaFree(ptr));
}

size_t CudaAllocator::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_in_use_;
}

size_t CudaAllocator::bytes_cached() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_cached_;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);  // errors ignored, as in ~CudaAllocator
}

void PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_) return;
  if (data_ != nullptr) {
    INFLIGHT_CUDA_CHECK(cudaFreeHost(data_));
    data_ = nullptr;
    capacity_ = 0;
  }
  const size_t rounded = (bytes + 4095) / 4096 * 4096;
  void* ptr = nullptr;
  INFLIGHT_CUDA_CHECK(cudaHostAlloc(&ptr, rounded, cudaHostAllocDefault));
  data_ = static_cast<char*>(ptr);
  capacity_ = rounded;
}

}  // namespace inflight
