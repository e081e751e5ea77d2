#include "ops/rope_kv_write.h"

#include <cmath>
#include <numeric>

#include "core/fp8.h"

#include "ops/op_test_util.h"

namespace inflight {
namespace {

using testing::error_code_of;
using testing::expect_close;
using testing::i32_tensor;
using testing::i64_tensor;
using testing::kF32RelTol;
using testing::poison;
using testing::random_tensor;

struct RopeCase {
  int64_t heads, kv_heads, head_dim, block_size, tokens;
};

// Rotate-half RoPE in double, from the f32 angle the op's contract specifies.
void rope_ref(const float* x, int64_t d, int32_t pos, const std::vector<float>& inv_freq,
              double* out) {
  const int64_t half = d / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[static_cast<size_t>(i)];
    const double c = std::cos(static_cast<double>(angle)), s = std::sin(static_cast<double>(angle));
    out[i] = x[i] * c - static_cast<double>(x[i + half]) * s;
    out[i + half] = x[i + half] * c + static_cast<double>(x[i]) * s;
  }
}

// One (token, kv head) vector of an e4m3 cache against its exact value ref [d]: the scale is
// kv_fp8_scale of ref's largest magnitude, and each value is ref rounded to e4m3 at that scale
// (half an e4m3 step: 2^-4 relative, or 2^-10 scale among subnormals), the largest at +-448.
void expect_fp8_row(const uint8_t* values, float scale, const double* ref, int64_t d,
                    const std::string& what) {
  double amax = 0.0;
  for (int64_t i = 0; i < d; ++i) amax = std::max(amax, std::fabs(ref[i]));
  ASSERT_NEAR(scale, kv_fp8_scale(static_cast<float>(amax)), 1e-5 * amax / 448.0 + 1e-30) << what;
  for (int64_t i = 0; i < d; ++i) {
    const double got = static_cast<double>(e4m3_to_f32(values[i])) * scale;
    const double tol = std::max(std::fabs(ref[i]) / 16.0, scale / 1024.0) * 1.0001 + 1e-6 * amax;
    ASSERT_NEAR(got, ref[i], tol) << what << " element " << i;
  }
}

void run_case(const RopeCase& rc, std::mt19937& rng, bool fp8) {
  const int64_t h = rc.heads, kh = rc.kv_heads, d = rc.head_dim, t = rc.tokens;
  const int64_t num_blocks = (t + 5) / rc.block_size + 2;
  const int64_t num_slots = num_blocks * rc.block_size;
  const Tensor qkv = random_tensor({t, (h + 2 * kh) * d}, rng, 2.0f);
  std::vector<float> inv_freq(static_cast<size_t>(d / 2));
  for (int64_t i = 0; i < d / 2; ++i) {
    inv_freq[static_cast<size_t>(i)] =
        static_cast<float>(1.0 / std::pow(10000.0, 2.0 * static_cast<double>(i) / d));
  }
  Tensor inv_freq_t = Tensor::empty({d / 2}, DType::kF32);
  std::copy(inv_freq.begin(), inv_freq.end(), inv_freq_t.data<float>());
  std::uniform_int_distribution<int32_t> pos_dist(0, 5000);
  std::vector<int32_t> positions(static_cast<size_t>(t));
  for (auto& p : positions) p = pos_dist(rng);
  // Distinct random slots anywhere in the cache; one token is padding (slot -1).
  std::vector<int64_t> all(static_cast<size_t>(num_slots));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int64_t> slots(all.begin(), all.begin() + t);
  if (t > 1) slots[1] = -1;

  const Tensor q_out = Tensor::empty({t, h, d}, DType::kF32);
  poison(q_out);
  KvCacheLayer cache;
  const DType cache_dtype = fp8 ? DType::kF8E4M3 : DType::kF32;
  cache.key = Tensor::empty({num_blocks, rc.block_size, kh, d}, cache_dtype);
  cache.value = Tensor::empty(cache.key.shape(), cache_dtype);
  if (fp8) {
    // e4m3 NaN bytes and NaN scales: what the op does not write stays recognisable.
    std::memset(cache.key.raw(), 0x7f, static_cast<size_t>(cache.key.nbytes()));
    std::memset(cache.value.raw(), 0x7f, static_cast<size_t>(cache.value.nbytes()));
    cache.key_scales = Tensor::empty({num_blocks, rc.block_size, kh}, DType::kF32);
    cache.value_scales = Tensor::empty(cache.key_scales.shape(), DType::kF32);
    poison(cache.key_scales);
    poison(cache.value_scales);
  } else {
    poison(cache.key);
    poison(cache.value);
  }
  rope_kv_write_cpu(make_rope_kv_write_params(qkv, i32_tensor(positions), i64_tensor(slots),
                                              inv_freq_t, q_out, cache));

  const std::string what = "rope h=" + std::to_string(h) + " kh=" + std::to_string(kh) +
                           " d=" + std::to_string(d) + " bs=" + std::to_string(rc.block_size) +
                           " t=" + std::to_string(t) + (fp8 ? " fp8" : "");
  std::vector<double> expect_q(static_cast<size_t>(t * h * d));
  const int64_t row = (h + 2 * kh) * d;
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t hh = 0; hh < h; ++hh) {
      rope_ref(qkv.data<float>() + i * row + hh * d, d, positions[static_cast<size_t>(i)], inv_freq,
               expect_q.data() + (i * h + hh) * d);
    }
  }
  expect_close(q_out, expect_q, kF32RelTol, what + " q");

  // Written slots hold rotated k and plain v; every other slot is untouched (still NaN).
  std::vector<double> expect_k(static_cast<size_t>(kh * d)), expect_v(static_cast<size_t>(kh * d));
  for (int64_t i = 0; i < t; ++i) {
    const int64_t slot = slots[static_cast<size_t>(i)];
    if (slot < 0) continue;
    const float* k_src = qkv.data<float>() + i * row + h * d;
    for (int64_t hh = 0; hh < kh; ++hh) {
      rope_ref(k_src + hh * d, d, positions[static_cast<size_t>(i)], inv_freq,
               expect_k.data() + hh * d);
    }
    const float* v_src = k_src + kh * d;
    if (fp8) {
      std::copy(v_src, v_src + kh * d, expect_v.begin());
      for (int64_t hh = 0; hh < kh; ++hh) {
        const int64_t at = slot * kh + hh;
        expect_fp8_row(cache.key.data<uint8_t>() + at * d, cache.key_scales.data<float>()[at],
                       expect_k.data() + hh * d, d, what + " k");
        expect_fp8_row(cache.value.data<uint8_t>() + at * d, cache.value_scales.data<float>()[at],
                       expect_v.data() + hh * d, d, what + " v");
      }
      continue;
    }
    expect_close(cache.key.data<float>() + slot * kh * d, expect_k.data(), kh * d, kF32RelTol,
                 what + " k");
    const float* v_dst = cache.value.data<float>() + slot * kh * d;
    for (int64_t e = 0; e < kh * d; ++e) ASSERT_EQ(v_dst[e], v_src[e]) << what << " v";
  }
  const int64_t written = t - (t > 1 ? 1 : 0);
  const int64_t untouched = (num_slots - written) * kh;
  if (fp8) {
    EXPECT_EQ(testing::count_nan(cache.key_scales.data<float>(), cache.key_scales.numel()),
              untouched)
        << what << ": stray writes to the K scales";
    EXPECT_EQ(testing::count_nan(cache.value_scales.data<float>(), cache.value_scales.numel()),
              untouched)
        << what << ": stray writes to the V scales";
    const auto nan_bytes = [](const Tensor& c) {
      return std::count(c.data<uint8_t>(), c.data<uint8_t>() + c.numel(), uint8_t{0x7f});
    };
    // A written value is never NaN (finite inputs saturate at 448).
    EXPECT_EQ(nan_bytes(cache.key), untouched * d) << what << ": stray writes to the K cache";
    EXPECT_EQ(nan_bytes(cache.value), untouched * d) << what << ": stray writes to the V cache";
    return;
  }
  EXPECT_EQ(testing::count_nan(cache.key.data<float>(), cache.key.numel()), untouched * d)
      << what << ": stray writes to the K cache";
  EXPECT_EQ(testing::count_nan(cache.value.data<float>(), cache.value.numel()), untouched * d)
      << what << ": stray writes to the V cache";
}

TEST(RopeKvWriteCpu, MatchesReferenceAndWritesOnlyMappedSlots) {
  std::mt19937 rng(31);
  for (auto [h, kh] : {std::pair<int64_t, int64_t>{1, 1}, {9, 3}, {4, 2}, {7, 1}}) {
    for (int64_t d : {2, 8, 64}) {
      for (int64_t bs : {1, 3, 16}) {
        for (int64_t t : {1, 3, 7, 91}) run_case({h, kh, d, bs, t}, rng, /*fp8=*/false);
      }
    }
  }
}

TEST(RopeKvWriteCpu, Fp8CacheHoldsEachVectorAtItsOwnScale) {
  std::mt19937 rng(32);
  for (auto [h, kh] : {std::pair<int64_t, int64_t>{1, 1}, {9, 3}, {4, 2}}) {
    for (int64_t d : {2, 8, 64, 128}) {
      for (int64_t bs : {1, 16}) {
        for (int64_t t : {1, 7, 91}) run_case({h, kh, d, bs, t}, rng, /*fp8=*/true);
      }
    }
  }
}

TEST(RopeKvWriteCpu, Fp8ZeroVectorGetsScaleOne) {
  // An all-zero k/v vector (e.g. padding-free zero activations) must not divide by zero.
  const int64_t d = 8;
  const Tensor qkv = Tensor::zeros({1, 3 * d}, DType::kF32);
  Tensor inv_freq = Tensor::zeros({d / 2}, DType::kF32);
  const Tensor q_out = Tensor::empty({1, 1, d}, DType::kF32);
  KvCacheLayer cache{Tensor::empty({1, 1, 1, d}, DType::kF8E4M3),
                     Tensor::empty({1, 1, 1, d}, DType::kF8E4M3),
                     Tensor::empty({1, 1, 1}, DType::kF32), Tensor::empty({1, 1, 1}, DType::kF32)};
  rope_kv_write_cpu(
      make_rope_kv_write_params(qkv, i32_tensor({5}), i64_tensor({0}), inv_freq, q_out, cache));
  EXPECT_EQ(cache.key_scales.data<float>()[0], 1.0f);
  EXPECT_EQ(cache.value_scales.data<float>()[0], 1.0f);
  for (int64_t i = 0; i < d; ++i) EXPECT_EQ(cache.key.data<uint8_t>()[i], 0);
}

TEST(RopeKvWriteParams, RejectsInconsistentShapes) {
  std::mt19937 rng(1);
  const int64_t t = 3, h = 4, kh = 2, d = 8;
  const Tensor qkv = random_tensor({t, (h + 2 * kh) * d}, rng);
  const Tensor pos = i32_tensor({0, 1, 2});
  const Tensor slots = i64_tensor({0, 1, 2});
  const Tensor inv_freq = random_tensor({d / 2}, rng);
  const Tensor q_out = Tensor::empty({t, h, d}, DType::kF32);
  const KvCacheLayer cache{.key = Tensor::empty({2, 4, kh, d}, DType::kF32),
                           .value = Tensor::empty({2, 4, kh, d}, DType::kF32)};
  const KvCacheLayer bad_cache{.key = Tensor::empty({2, 4, kh + 1, d}, DType::kF32),
                               .value = Tensor::empty({2, 4, kh + 1, d}, DType::kF32)};
  // e4m3 caches need both scale tensors, shaped [blocks, block_size, kv heads].
  const KvCacheLayer fp8_cache{
      Tensor::empty({2, 4, kh, d}, DType::kF8E4M3), Tensor::empty({2, 4, kh, d}, DType::kF8E4M3),
      Tensor::empty({2, 4, kh}, DType::kF32), Tensor::empty({2, 4, kh}, DType::kF32)};
  KvCacheLayer unscaled = fp8_cache;
  unscaled.value_scales = Tensor();
  KvCacheLayer misshapen = fp8_cache;
  misshapen.key_scales = Tensor::empty({2, 4, kh, 1}, DType::kF32);
  const KvCacheLayer bf16_cache{.key = Tensor::empty({2, 4, kh, d}, DType::kBF16),
                                .value = Tensor::empty({2, 4, kh, d}, DType::kBF16)};
  EXPECT_NO_THROW(make_rope_kv_write_params(qkv, pos, slots, inv_freq, q_out, fp8_cache));
  for (const KvCacheLayer* bad :
       std::initializer_list<const KvCacheLayer*>{&unscaled, &misshapen, &bf16_cache}) {
    EXPECT_EQ(
        error_code_of([&] { make_rope_kv_write_params(qkv, pos, slots, inv_freq, q_out, *bad); }),
        ErrorCode::kInvalidArgument);
  }
  const Tensor odd_q = Tensor::empty({t, h, d - 1}, DType::kF32);
  const Tensor short_pos = i32_tensor({0, 1});
  EXPECT_NO_THROW(make_rope_kv_write_params(qkv, pos, slots, inv_freq, q_out, cache));
  EXPECT_EQ(error_code_of(
                [&] { make_rope_kv_write_params(qkv, pos, slots, inv_freq, q_out, bad_cache); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      error_code_of([&] { make_rope_kv_write_params(qkv, pos, slots, inv_freq, odd_q, cache); }),
      ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of(
                [&] { make_rope_kv_write_params(qkv, short_pos, slots, inv_freq, q_out, cache); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      error_code_of([&] { make_rope_kv_write_params(qkv, pos, pos, inv_freq, q_out, cache); }),
      ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace inflight
