#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp8.h"
#include "core/thread_pool.h"
#include "ops/rope_kv_write.h"

namespace inflight {

namespace {

// Rotates one head: dst = rope(src) with precomputed cos/sin [half].
void rotate(const float* src, float* dst, const float* cos_v, const float* sin_v, int32_t half) {
  for (int32_t i = 0; i < half; ++i) {
    const float x1 = src[i], x2 = src[i + half];
    dst[i] = x1 * cos_v[i] - x2 * sin_v[i];
    dst[i + half] = x2 * cos_v[i] + x1 * sin_v[i];
  }
}

// One (token, kv head) vector x [n] into an e4m3 cache: values and their scale (ops/paged_kv.h).
void store_fp8(const float* x, int32_t n, uint8_t* values, float* scale) {
  float amax = 0.0f;
  for (int32_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  *scale = kv_fp8_scale(amax);
  const float inv = 1.0f / *scale;
  for (int32_t i = 0; i < n; ++i) values[i] = f32_to_e4m3(x[i] * inv);
}

}  // namespace

void rope_kv_write_cpu(const RopeKvWriteParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "rope_kv_write_cpu: f32 only, got {}",
                 dtype_name(p.dtype));
  const int32_t num_heads = p.num_heads, num_kv_heads = p.kv.num_kv_heads;
  const int32_t head_dim = p.kv.head_dim, half = head_dim / 2;
  const int64_t row = static_cast<int64_t>(num_heads + 2 * num_kv_heads) * head_dim;
  const auto* qkv = static_cast<const float*>(p.qkv);
  auto* q_out = static_cast<float*>(p.q_out);
  const PagedKv& kv = p.kv;
  ThreadPool::global().parallel_for(
      p.num_tokens,
      [&](int64_t begin, int64_t end) {
        std::vector<float> cos_v(static_cast<size_t>(half)), sin_v(static_cast<size_t>(half));
        std::vector<float> k_row(kv.fp8() ? static_cast<size_t>(head_dim) : 0);
        for (int64_t t = begin; t < end; ++t) {
          const float pos = static_cast<float>(p.positions[t]);
          for (int32_t i = 0; i < half; ++i) {
            // The angle is rounded to f32 first, as the reference computes it.
            const float angle = pos * p.inv_freq[i];
            cos_v[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
            sin_v[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
          }
          const float* src = qkv + t * row;
          for (int32_t h = 0; h < num_heads; ++h) {
            rotate(src + h * head_dim, q_out + (t * num_heads + h) * head_dim, cos_v.data(),
                   sin_v.data(), half);
          }
          const int64_t slot = p.slot_mapping[t];
          if (slot < 0) continue;
          const float* k_src = src + static_cast<int64_t>(num_heads) * head_dim;
          const float* v_src = k_src + static_cast<int64_t>(num_kv_heads) * head_dim;
          for (int32_t h = 0; h < num_kv_heads; ++h) {
            const int64_t off = kv.offset(slot, h);
            const float* v = v_src + h * head_dim;
            if (kv.fp8()) {
              rotate(k_src + h * head_dim, k_row.data(), cos_v.data(), sin_v.data(), half);
              const int64_t at = kv.scale_offset(slot, h);
              store_fp8(k_row.data(), head_dim, static_cast<uint8_t*>(kv.k) + off,
                        kv.k_scales + at);
              store_fp8(v, head_dim, static_cast<uint8_t*>(kv.v) + off, kv.v_scales + at);
            } else {
              rotate(k_src + h * head_dim, static_cast<float*>(kv.k) + off, cos_v.data(),
                     sin_v.data(), half);
              std::memcpy(static_cast<float*>(kv.v) + off, v, sizeof(float) * head_dim);
            }
          }
        }
      },
      /*min_chunk=*/std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row)));
}

}  // namespace inflight
