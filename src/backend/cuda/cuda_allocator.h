// Device and pinned-host memory for the CUDA backend.
//
// CudaAllocator: a caching allocator over cudaMalloc. A freed block goes back to a free list
// keyed by its rounded size and is handed out again to a request of the same rounded size, so
// workspaces that grow and shrink stop calling cudaMalloc/cudaFree (cudaFree synchronises the
// whole device) after warm-up.
// NOTE: a block is reused as soon as its last host reference goes, without waiting for device
// work that may still read it. That is safe only because every kernel and copy of the owning
// backend runs on one stream, in order: whatever reuses the block is enqueued after whatever
// used it. A second stream would need per-stream free lists or events.
//
// PinnedBuffer: page-locked host memory (cudaHostAlloc), the staging area of asynchronous
// host <-> device copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace inflight {

class CudaAllocator : public std::enable_shared_from_this<CudaAllocator> {
 public:
  // Memory on `device` (the caller has made it current).
  static std::shared_ptr<CudaAllocator> create(int device);
  ~CudaAllocator();
  CudaAllocator(const CudaAllocator&) = delete;
  CudaAllocator& operator=(const CudaAllocator&) = delete;

  // At least `bytes` (256-byte aligned; bytes 0 gets a minimal block). The returned owner's
  // deleter gives the block back to the cache; it keeps the allocator alive. Throws
  // Error(kOutOfMemory) after freeing every cached block and retrying once.
  std::shared_ptr<void> allocate(size_t bytes);

  // cudaFree of every cached (unused) block.
  void release_cached();

  size_t bytes_in_use() const;
  size_t bytes_cached() const;

 private:
  explicit CudaAllocator(int device) : device_(device) {}
  void give_back(void* ptr, size_t rounded) noexcept;
  static size_t round_up(size_t bytes);

  const int device_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;  // rounded size -> cached block
  size_t bytes_in_use_ = 0;
  size_t bytes_cached_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // Grows to at least `bytes` (contents are not kept). The caller makes sure no copy still
  // reads or writes the old buffer.
  void reserve(size_t bytes);
  char* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace inflight
