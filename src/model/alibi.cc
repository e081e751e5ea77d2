#include "model/alibi.h"

#include <cmath>

namespace inflight {

std::vector<float> alibi_slopes(int64_t num_heads, float bias_max) {
  int64_t padded = 1;
  while (padded < num_heads) padded *= 2;
  // base_i = (i + 1) * (bias_max / H') in f32, slope = 1 / 2^base (torch.pow in f32).
  const float step = bias_max / static_cast<float>(padded);
  std::vector<float> all(static_cast<size_t>(padded));
  for (int64_t i = 0; i < padded; ++i) {
    const float base = static_cast<float>(i + 1) * step;
    all[static_cast<size_t>(i)] = 1.0f / std::exp2(base);
  }
  if (padded == num_heads) return all;
  std::vector<float> slopes;
  slopes.reserve(static_cast<size_t>(padded));
  for (int64_t i = 1; i < padded; i += 2) slopes.push_back(all[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < padded; i += 2) slopes.push_back(all[static_cast<size_t>(i)]);
  slopes.resize(static_cast<size_t>(num_heads));
  return slopes;
}

}  // namespace inflight
