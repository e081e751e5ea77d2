#include "core/fp8.h"

#include <array>

namespace inflight {

const float* e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[static_cast<size_t>(i)] = e4m3_to_f32(static_cast<uint8_t>(i));
    return t;
  }();
  return table.data();
}

}  // namespace inflight
