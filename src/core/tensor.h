// Tensor: a dense, row-major view of typed memory on one device.
//
// A Tensor shares ownership of the memory it views (a std::shared_ptr to the owner), so views
// and slices keep the allocation alive. Shapes are [d0, d1, ...] with the last dimension
// contiguous; there are no strides other than row-major ones.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"

namespace inflight {

// Where a tensor lives: the host, or one GPU by ordinal. Ops compare whole Devices, so tensors
// of two GPUs never meet in one op.
struct Device {
  enum class Type : uint8_t { kCpu, kCuda };
  Type type = Type::kCpu;
  int16_t index = 0;  // the CUDA ordinal; 0 on the host

  static const Device kCpu;
  static const Device kCuda;  // CUDA device 0
  static constexpr Device cuda(int index) { return {Type::kCuda, static_cast<int16_t>(index)}; }
  constexpr bool is_cuda() const { return type == Type::kCuda; }
  friend constexpr bool operator==(const Device&, const Device&) = default;
};
inline constexpr Device Device::kCpu{Device::Type::kCpu, 0};
inline constexpr Device Device::kCuda{Device::Type::kCuda, 0};

// "cpu", "cuda:1".
std::string device_str(Device device);

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  // Allocates zero-initialised host memory (64-byte aligned).
  static Tensor zeros(Shape shape, DType dtype);
  // Allocates uninitialised host memory (64-byte aligned).
  static Tensor empty(Shape shape, DType dtype);
  // Views memory owned by `owner` (which may be null for memory the caller keeps alive).
  static Tensor wrap(void* data, Shape shape, DType dtype, Device device,
                     std::shared_ptr<void> owner);

  bool defined() const { return defined_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t i) const;  // negative i counts from the end
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  void* raw() const { return data_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_);
  }

  // Same memory, another shape with the same number of elements.
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the first dimension.
  Tensor rows(int64_t begin, int64_t end) const;

  const std::shared_ptr<void>& owner() const { return owner_; }

 private:
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
  bool defined_ = false;
  std::shared_ptr<void> owner_;
};

}  // namespace inflight
