#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace inflight {

std::string device_str(Device device) {
  return device.is_cuda() ? "cuda:" + std::to_string(device.index) : "cpu";
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

int64_t count(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    INFLIGHT_CHECK(d >= 0, "negative dimension in shape {}", shape_str(shape));
    n *= d;
  }
  return n;
}

}  // namespace

Tensor Tensor::empty(Shape shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(count(shape)) * dtype_size(dtype);
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  INFLIGHT_CHECK_CODE(p != nullptr || rounded == 0, ErrorCode::kOutOfMemory,
                      "host allocation of {} bytes failed", bytes);
  std::shared_ptr<void> owner(p, [](void* q) { std::free(q); });
  return wrap(p, std::move(shape), dtype, Device::kCpu, std::move(owner));
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  if (t.nbytes()) std::memset(t.raw(), 0, t.nbytes());
  return t;
}

Tensor Tensor::wrap(void* data, Shape shape, DType dtype, Device device,
                    std::shared_ptr<void> owner) {
  Tensor t;
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.owner_ = std::move(owner);
  t.defined_ = true;
  count(t.shape_);  // validates
  return t;
}

int64_t Tensor::size(int64_t i) const {
  if (i < 0) i += dim();
  INFLIGHT_CHECK(i >= 0 && i < dim(), "dimension {} out of range for shape {}", i,
                 shape_str(shape_));
  return shape_[static_cast<size_t>(i)];
}

int64_t Tensor::numel() const { return defined_ ? count(shape_) : 0; }

Tensor Tensor::reshape(Shape shape) const {
  INFLIGHT_CHECK(count(shape) == numel(), "cannot reshape {} to {}", shape_str(shape_),
                 shape_str(shape));
  return wrap(data_, std::move(shape), dtype_, device_, owner_);
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  INFLIGHT_CHECK(dim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
                 "rows [{}, {}) out of range for shape {}", begin, end, shape_str(shape_));
  Shape s = shape_;
  s[0] = end - begin;
  const int64_t row_elems = shape_[0] ? numel() / shape_[0] : 0;
  auto* p = static_cast<char*>(data_) + begin * row_elems * static_cast<int64_t>(dtype_size(dtype_));
  return wrap(p, std::move(s), dtype_, device_, owner_);
}

}  // namespace inflight
