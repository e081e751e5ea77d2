#include "ops/rope_kv_write.h"

#include <numeric>

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

void run_case(const RopeCase& rc, std::mt19937& rng) {
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
  const Tensor k_cache = Tensor::empty({num_blocks, rc.block_size, kh, d}, DType::kF32);
  const Tensor v_cache = Tensor::empty(k_cache.shape(), DType::kF32);
  poison(q_out);
  poison(k_cache);
  poison(v_cache);
  rope_kv_write_cpu(make_rope_kv_write_params(qkv, i32_tensor(positions), i64_tensor(slots),
                                              inv_freq_t, q_out, k_cache, v_cache));

  const std::string what = "rope h=" + std::to_string(h) + " kh=" + std::to_string(kh) +
                           " d=" + std::to_string(d) + " bs=" + std::to_string(rc.block_size) +
                           " t=" + std::to_string(t);
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
  std::vector<double> expect_k(static_cast<size_t>(kh * d));
  for (int64_t i = 0; i < t; ++i) {
    const int64_t slot = slots[static_cast<size_t>(i)];
    if (slot < 0) continue;
    const float* k_src = qkv.data<float>() + i * row + h * d;
    for (int64_t hh = 0; hh < kh; ++hh) {
      rope_ref(k_src + hh * d, d, positions[static_cast<size_t>(i)], inv_freq,
               expect_k.data() + hh * d);
    }
    expect_close(k_cache.data<float>() + slot * kh * d, expect_k.data(), kh * d, kF32RelTol,
                 what + " k");
    const float* v_src = k_src + kh * d;
    const float* v_dst = v_cache.data<float>() + slot * kh * d;
    for (int64_t e = 0; e < kh * d; ++e) ASSERT_EQ(v_dst[e], v_src[e]) << what << " v";
  }
  const int64_t written = t - (t > 1 ? 1 : 0);
  EXPECT_EQ(testing::count_nan(k_cache.data<float>(), k_cache.numel()),
            (num_slots - written) * kh * d)
      << what << ": stray writes to the K cache";
  EXPECT_EQ(testing::count_nan(v_cache.data<float>(), v_cache.numel()),
            (num_slots - written) * kh * d)
      << what << ": stray writes to the V cache";
}

TEST(RopeKvWriteCpu, MatchesReferenceAndWritesOnlyMappedSlots) {
  std::mt19937 rng(31);
  for (auto [h, kh] : {std::pair<int64_t, int64_t>{1, 1}, {9, 3}, {4, 2}, {7, 1}}) {
    for (int64_t d : {2, 8, 64}) {
      for (int64_t bs : {1, 3, 16}) {
        for (int64_t t : {1, 3, 7, 91}) run_case({h, kh, d, bs, t}, rng);
      }
    }
  }
}

TEST(RopeKvWriteParams, RejectsInconsistentShapes) {
  std::mt19937 rng(1);
  const int64_t t = 3, h = 4, kh = 2, d = 8;
  const Tensor qkv = random_tensor({t, (h + 2 * kh) * d}, rng);
  const Tensor pos = i32_tensor({0, 1, 2});
  const Tensor slots = i64_tensor({0, 1, 2});
  const Tensor inv_freq = random_tensor({d / 2}, rng);
  const Tensor q_out = Tensor::empty({t, h, d}, DType::kF32);
  const Tensor cache = Tensor::empty({2, 4, kh, d}, DType::kF32);
  const Tensor bad_cache = Tensor::empty({2, 4, kh + 1, d}, DType::kF32);
  const Tensor odd_q = Tensor::empty({t, h, d - 1}, DType::kF32);
  const Tensor short_pos = i32_tensor({0, 1});
  EXPECT_NO_THROW(make_rope_kv_write_params(qkv, pos, slots, inv_freq, q_out, cache, cache));
  EXPECT_EQ(error_code_of([&] {
              make_rope_kv_write_params(qkv, pos, slots, inv_freq, q_out, bad_cache, bad_cache);
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of(
                [&] { make_rope_kv_write_params(qkv, pos, slots, inv_freq, odd_q, cache, cache); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] {
              make_rope_kv_write_params(qkv, short_pos, slots, inv_freq, q_out, cache, cache);
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of(
                [&] { make_rope_kv_write_params(qkv, pos, pos, inv_freq, q_out, cache, cache); }),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace inflight
