#include "ops/paged_attention.h"

#include <cstring>
#include <numeric>

#include "core/fp8.h"

#include "ops/op_test_util.h"

namespace inflight {
namespace {

using testing::error_code_of;
using testing::expect_close;
using testing::i32_tensor;
using testing::kF32RelTol;
using testing::poison;
using testing::random_tensor;

struct Seq {
  int32_t context_len;
  int32_t num_new;
};

struct Batch {
  std::vector<int32_t> query_start{0};
  std::vector<int32_t> context_lens;
  std::vector<int32_t> block_tables;
  int32_t max_blocks = 0;
  int64_t num_blocks = 0;
};

// Random, shuffled, non-contiguous block ids per sequence; table padding is -1.
Batch make_batch(const std::vector<Seq>& seqs, int32_t block_size, std::mt19937& rng) {
  Batch b;
  int64_t total_blocks = 0;
  for (const Seq& s : seqs) {
    const int32_t blocks = (s.context_len + block_size - 1) / block_size;
    b.max_blocks = std::max(b.max_blocks, blocks + 1);
    total_blocks += blocks;
  }
  b.num_blocks = total_blocks * 2 + 1;  // unused blocks in between
  std::vector<int32_t> ids(static_cast<size_t>(b.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  for (const Seq& s : seqs) {
    b.query_start.push_back(b.query_start.back() + s.num_new);
    b.context_lens.push_back(s.context_len);
    const int32_t blocks = (s.context_len + block_size - 1) / block_size;
    for (int32_t i = 0; i < b.max_blocks; ++i) {
      b.block_tables.push_back(i < blocks ? ids[next++] : -1);
    }
  }
  return b;
}

struct AttnCase {
  int64_t heads, kv_heads, head_dim;
  int32_t block_size, window;
};

// fp8: the op reads an e4m3 cache (random non-NaN bytes, a random scale per slot and kv head)
// and the reference its exact dequantized values. alibi: random slopes per head, the reference
// adding slope * (key position - query position) to each scaled score.
void run_case(const AttnCase& ac, const std::vector<Seq>& seqs, std::mt19937& rng, bool fp8 = false,
              bool alibi = false) {
  const int64_t h = ac.heads, kh = ac.kv_heads, d = ac.head_dim, group = h / kh;
  const int32_t bs = ac.block_size;
  const Batch b = make_batch(seqs, bs, rng);
  const int64_t t = b.query_start.back();
  const int32_t num_seqs = static_cast<int32_t>(seqs.size());
  const Tensor q = random_tensor({t, h, d}, rng, 2.0f);
  // Every slot starts as NaN; only the sequences' context slots get values, so reading any
  // other slot poisons the output. k_cache, v_cache: the values the reference reads.
  const Tensor k_cache = Tensor::empty({b.num_blocks, bs, kh, d}, DType::kF32);
  const Tensor v_cache = Tensor::empty(k_cache.shape(), DType::kF32);
  poison(k_cache);
  poison(v_cache);
  KvCacheLayer cache{.key = k_cache, .value = v_cache};
  if (fp8) {
    cache.key = Tensor::empty(k_cache.shape(), DType::kF8E4M3);
    cache.value = Tensor::empty(k_cache.shape(), DType::kF8E4M3);
    std::memset(cache.key.raw(), 0x7f, cache.key.nbytes());  // e4m3 NaN
    std::memset(cache.value.raw(), 0x7f, cache.value.nbytes());
    cache.key_scales = Tensor::empty({b.num_blocks, bs, kh}, DType::kF32);
    cache.value_scales = Tensor::empty(cache.key_scales.shape(), DType::kF32);
    poison(cache.key_scales);
    poison(cache.value_scales);
  }
  std::uniform_int_distribution<int> byte(0, 253);  // 0x7f and 0xff are NaN: skipped below
  std::uniform_real_distribution<float> scale_dist(0.001f, 0.02f);
  // One (slot, kv head) vector: random f32 values, or random e4m3 bytes and scale.
  auto fill = [&](const Tensor& ref, const Tensor& values, const Tensor& scales, int64_t at,
                  std::uniform_real_distribution<float>& dist) {
    if (!fp8) {
      for (int64_t e = 0; e < d; ++e) ref.data<float>()[at * d + e] = dist(rng);
      return;
    }
    const float sc = scale_dist(rng);
    scales.data<float>()[at] = sc;
    for (int64_t e = 0; e < d; ++e) {
      int v = byte(rng);
      v += v >= 0x7f;  // skip 0x7f (and 0xff, past 253 + 1)
      values.data<uint8_t>()[at * d + e] = static_cast<uint8_t>(v);
      ref.data<float>()[at * d + e] = e4m3_to_f32(static_cast<uint8_t>(v)) * sc;
    }
  };
  auto slot_of = [&](int32_t s, int32_t pos) {
    return static_cast<int64_t>(b.block_tables[static_cast<size_t>(s * b.max_blocks + pos / bs)]) *
               bs +
           pos % bs;
  };
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  int32_t max_context = 0;
  for (int32_t s = 0; s < num_seqs; ++s) {
    max_context = std::max(max_context, b.context_lens[static_cast<size_t>(s)]);
    for (int32_t pos = 0; pos < b.context_lens[static_cast<size_t>(s)]; ++pos) {
      for (int64_t hh = 0; hh < kh; ++hh) {
        fill(k_cache, cache.key, cache.key_scales, slot_of(s, pos) * kh + hh, dist);
        fill(v_cache, cache.value, cache.value_scales, slot_of(s, pos) * kh + hh, dist);
      }
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const Tensor slopes = random_tensor({h}, rng, 0.5f);
  for (int64_t hh = 0; hh < h; ++hh) slopes.data<float>()[hh] += 0.5f;  // (0, 1]
  const Tensor out = Tensor::empty({t, h, d}, DType::kF32);
  poison(out);
  paged_attention_cpu(make_paged_attention_params(
      q, cache, i32_tensor(b.block_tables, {num_seqs, b.max_blocks}), i32_tensor(b.query_start),
      i32_tensor(b.context_lens), max_context, ac.window, scale, alibi ? &slopes : nullptr, out));

  std::vector<double> expect(static_cast<size_t>(t * h * d));
  for (int32_t s = 0; s < num_seqs; ++s) {
    const int32_t qs = b.query_start[static_cast<size_t>(s)];
    const int32_t n_new = b.query_start[static_cast<size_t>(s) + 1] - qs;
    for (int32_t i = 0; i < n_new; ++i) {
      const int64_t tok = qs + i;
      const int32_t pos = b.context_lens[static_cast<size_t>(s)] - n_new + i;
      const int32_t lo = ac.window > 0 ? std::max(0, pos - ac.window + 1) : 0;
      for (int64_t hh = 0; hh < h; ++hh) {
        const float* qv = q.data<float>() + (tok * h + hh) * d;
        const int64_t kvh = hh / group;
        std::vector<double> score;
        for (int32_t j = lo; j <= pos; ++j) {
          const float* kv = k_cache.data<float>() + slot_of(s, j) * kh * d + kvh * d;
          double dotp = 0.0;
          for (int64_t e = 0; e < d; ++e) dotp += static_cast<double>(qv[e]) * kv[e];
          const double bias =
              alibi ? static_cast<double>(slopes.data<float>()[hh]) * (j - pos) : 0.0;
          score.push_back(dotp * scale + bias);
        }
        const double mx = *std::max_element(score.begin(), score.end());
        double sum = 0.0;
        for (double& x : score) sum += (x = std::exp(x - mx));
        double* o = expect.data() + (tok * h + hh) * d;
        for (int32_t j = lo; j <= pos; ++j) {
          const float* vv = v_cache.data<float>() + slot_of(s, j) * kh * d + kvh * d;
          for (int64_t e = 0; e < d; ++e) o[e] += score[static_cast<size_t>(j - lo)] / sum * vv[e];
        }
      }
    }
  }
  expect_close(out, expect, kF32RelTol,
               "attention h=" + std::to_string(h) + " kh=" + std::to_string(kh) +
                   " d=" + std::to_string(d) + " bs=" + std::to_string(bs) +
                   " window=" + std::to_string(ac.window) + " seqs=" + std::to_string(num_seqs) +
                   (fp8 ? " fp8" : "") + (alibi ? " alibi" : ""));
}

// Mixed prefill, chunked prefill and decode sequences of random lengths.
std::vector<Seq> random_seqs(int n, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> len(1, 80);
  std::vector<Seq> seqs;
  for (int i = 0; i < n; ++i) {
    const int32_t ctx = len(rng);
    const int kind = i % 3;  // 0: whole prompt, 1: decode, 2: a chunk
    const int32_t n_new = kind == 0   ? ctx
                          : kind == 1 ? 1
                                      : std::uniform_int_distribution<int32_t>(1, ctx)(rng);
    seqs.push_back({ctx, n_new});
  }
  return seqs;
}

TEST(PagedAttentionCpu, MatchesDenseReferenceOverRaggedBatches) {
  std::mt19937 rng(37);
  for (auto [h, kh] : {std::pair<int64_t, int64_t>{1, 1}, {9, 3}, {8, 1}}) {
    for (int64_t d : {1, 13, 64}) {
      for (int32_t bs : {1, 3, 16}) {
        for (int32_t window : {0, 1, 7}) {
          for (int n : {1, 3, 7}) run_case({h, kh, d, bs, window}, random_seqs(n, rng), rng);
        }
      }
    }
  }
}

TEST(PagedAttentionCpu, ReadsAnFp8CacheAsItsDequantizedValues) {
  std::mt19937 rng(38);
  for (auto [h, kh] : {std::pair<int64_t, int64_t>{1, 1}, {9, 3}, {8, 1}}) {
    for (int64_t d : {2, 14, 64, 128}) {
      for (int32_t bs : {1, 16}) {
        for (int32_t window : {0, 7}) {
          for (int n : {1, 5}) {
            run_case({h, kh, d, bs, window}, random_seqs(n, rng), rng, /*fp8=*/true);
          }
        }
      }
    }
  }
}

// ALiBi (MPT): prompts, decodes and chunks whose prefix is cached (a chunked prefill or a
// prefix-cache hit): positions are absolute, so every case matches the dense reference.
TEST(PagedAttentionCpu, AlibiMatchesDenseReference) {
  std::mt19937 rng(43);
  for (auto [h, kh] : {std::pair<int64_t, int64_t>{1, 1}, {6, 6}, {8, 2}}) {
    for (int64_t d : {2, 13, 64}) {
      for (int32_t bs : {1, 3, 16}) {
        for (int n : {1, 3, 7}) {
          run_case({h, kh, d, bs, 0}, random_seqs(n, rng), rng, /*fp8=*/false, /*alibi=*/true);
        }
        run_case({h, kh, d, bs, 0}, random_seqs(5, rng), rng, /*fp8=*/true, /*alibi=*/true);
      }
    }
  }
  run_case({6, 6, 64, 16, 0}, {{769, 1}, {700, 13}, {300, 300}}, rng, false, true);
}

TEST(PagedAttentionCpu, SingleTokenContextAndLongContext) {
  std::mt19937 rng(41);
  run_case({4, 2, 64, 16, 0}, {{1, 1}}, rng);
  run_case({4, 2, 64, 16, 0}, {{769, 1}, {769, 769}}, rng);
  run_case({4, 2, 64, 3, 0}, {{700, 13}}, rng);
}

TEST(PagedAttentionParams, RejectsInconsistentShapes) {
  std::mt19937 rng(1);
  const Tensor q = random_tensor({3, 4, 8}, rng);
  const KvCacheLayer cache{.key = Tensor::empty({4, 2, 2, 8}, DType::kF32),
                           .value = Tensor::empty({4, 2, 2, 8}, DType::kF32)};
  const KvCacheLayer bad_cache{.key = Tensor::empty({4, 2, 3, 8}, DType::kF32),
                               .value = Tensor::empty({4, 2, 3, 8}, DType::kF32)};
  const Tensor tables = i32_tensor({0, 1, 2, 3}, {2, 2});
  const Tensor qs = i32_tensor({0, 2, 3});
  const Tensor ctx = i32_tensor({2, 3});
  const Tensor out = Tensor::empty({3, 4, 8}, DType::kF32);
  EXPECT_NO_THROW(make_paged_attention_params(q, cache, tables, qs, ctx, 3, 0, 1.0f, nullptr, out));
  EXPECT_EQ(error_code_of([&] {
              make_paged_attention_params(q, bad_cache, tables, qs, ctx, 3, 0, 1.0f, nullptr, out);
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] {
              make_paged_attention_params(q, cache, tables, ctx, ctx, 3, 0, 1.0f, nullptr, out);
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] {
              make_paged_attention_params(q, cache, tables, qs, ctx, 5, 0, 1.0f, nullptr, out);
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] {
              make_paged_attention_params(q, cache, tables, qs, ctx, 3, 0, 1.0f, nullptr, q);
            }),
            ErrorCode::kInvalidArgument);
  const Tensor bad_slopes = random_tensor({3}, rng);  // not one per query head
  EXPECT_EQ(error_code_of([&] {
              make_paged_attention_params(q, cache, tables, qs, ctx, 3, 0, 1.0f, &bad_slopes, out);
            }),
            ErrorCode::kInvalidArgument);
  KvCacheLayer mixed = cache;  // K and V of different dtypes
  mixed.value = Tensor::empty({4, 2, 2, 8}, DType::kF8E4M3);
  KvCacheLayer scaled = cache;  // scales on an f32 cache
  scaled.key_scales = Tensor::empty({4, 2, 2}, DType::kF32);
  for (const KvCacheLayer* bad : std::initializer_list<const KvCacheLayer*>{&mixed, &scaled}) {
    EXPECT_EQ(error_code_of([&] {
                make_paged_attention_params(q, *bad, tables, qs, ctx, 3, 0, 1.0f, nullptr, out);
              }),
              ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace inflight
