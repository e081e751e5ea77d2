// PlannedWeight: one device tensor of a model, its stored parts looked up and shape-checked
// before any device memory is allocated. A model plans all its weights first, checks that
// their bytes fit the device (check_weights_fit), and only then allocates and loads: a config
// that the files do not back (10^9 layers over 30 layers of tensors) or weights larger than
// the device fail with a message naming the field or the sizes, not in the allocator.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "formats/stored_tensor.h"
#include "runtime/backend.h"

namespace inflight {

struct PlannedWeight {
  std::vector<StoredTensor> parts;  // stacked along the first dimension (fused q/k/v, gate/up)
  Shape shape;                      // of the device tensor: the parts' rows summed
  DType dtype = DType::kF32;        // the backend's weight format for the first part

  int64_t bytes() const;
};

// Throws Error(kOutOfMemory) when `bytes` of `what` ("model weights") exceed the device's free
// memory (Backend::memory_info), naming both.
void check_weights_fit(const Backend& backend, int64_t bytes, std::string_view what);

// Allocates the device tensor and converts every part into its rows; each part's mapped pages
// are released once loaded.
Tensor load_planned(Backend& backend, const PlannedWeight& w);

}  // namespace inflight
