// CUDA backend vs the CPU reference: rope_kv_write and paged_attention over mixed batches
// (prefill, chunked prefill with a cached prefix, decode), page sizes 1/3/16, GQA ratios
// 1/3/8, head dims 8..256, with and without a sliding window; then the tensor-core tile path
// (head dims 64 and 128) on awkward shapes: new tokens 1/4/7/64/129, contexts 1..8192 (split-KV
// decode at small batch), GQA ratios 1/4/8/32, windows; prompts and chunks of 1..300 tokens.
//
// Cache slots that no sequence may read (spare blocks, the tail of each last block) hold NaN in
// both backends' caches: a kernel that reads one turns its output NaN and fails the check.
// FP8 (e4m3) caches: rope_kv_write's quantization against the CPU's, and attention over the
// same e4m3 bytes and scales in both backends, on the same shapes.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <numeric>

#include "core/fp8.h"
#include "cuda_test_util.h"
#include "runtime/kv_cache_layer.h"

namespace inflight::test {
namespace {

Tensor inv_freq_host(int64_t head_dim, float theta) {
  Tensor t = Tensor::empty({head_dim / 2}, DType::kF32);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    t.data<float>()[i] = 1.0f / static_cast<float>(std::pow(static_cast<double>(theta), exponent));
  }
  return t;
}

struct Gqa {
  int64_t heads, kv_heads;
};

// A CUDA copy of a host tensor, bit for bit (e4m3 bytes).
Tensor upload_bytes(Backend& gpu, const Tensor& host) {
  Tensor t = gpu.alloc(host.shape(), host.dtype());
  EXPECT_EQ(cudaMemcpy(t.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  return t;
}

// A host copy of a device tensor, bit for bit.
Tensor download_bytes(Backend& gpu, const Tensor& t) {
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  gpu.download(t, host);
  gpu.synchronize();
  return host;
}

// A cache layer of `dtype` (f32 on the CPU, bf16 on CUDA, or e4m3) shaped [NB, BS, KH, D] on
// `backend`, with scales for e4m3.
KvCacheLayer cache_layer(Backend& backend, const Shape& shape, DType dtype) {
  KvCacheLayer layer{.key = backend.alloc(shape, dtype), .value = backend.alloc(shape, dtype)};
  if (dtype == DType::kF8E4M3) {
    layer.key_scales = backend.alloc({shape[0], shape[1], shape[2]}, DType::kF32);
    layer.value_scales = backend.alloc({shape[0], shape[1], shape[2]}, DType::kF32);
  }
  return layer;
}

// e4m3 vectors [rows, d] of two caches (with their scales [rows]) agree: the same scale up to
// f32 rounding, values at most one e4m3 step apart (the GPU's f32 RoPE and the CPU's may round
// a value on either side of a rounding boundary), and those steps rare.
void expect_fp8_rows_close(const std::string& what, const Tensor& got, const Tensor& got_scales,
                           const Tensor& ref, const Tensor& ref_scales, int64_t d) {
  const int64_t rows = ref_scales.numel();
  int64_t steps = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float gs = got_scales.data<float>()[r], rs = ref_scales.data<float>()[r];
    if (std::isnan(rs)) {
      ASSERT_TRUE(std::isnan(gs)) << what << ": row " << r << " written, the CPU left it";
      continue;
    }
    ASSERT_NEAR(gs, rs, 1e-5 * rs) << what << ": scale of row " << r;
    for (int64_t i = 0; i < d; ++i) {
      const uint8_t g = got.data<uint8_t>()[r * d + i], c = ref.data<uint8_t>()[r * d + i];
      if (g == c) continue;
      ++steps;
      const double a = e4m3_to_f32(g) * gs, b = e4m3_to_f32(c) * rs;
      ASSERT_LE(std::fabs(a - b), std::max(std::fabs(b) / 8.0, rs / 512.0) * 1.01)
          << what << ": row " << r << " element " << i;
    }
  }
  EXPECT_LE(steps, std::max<int64_t>(2, rows * d / 100)) << what << ": too many differing values";
}

void rope_kv_write_cases(bool fp8) {
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  std::mt19937 rng(fp8 ? 16 : 11);
  const int64_t head_dims[] = {64, 128, 2, 80, 256};
  int case_index = 0;
  for (const int64_t tokens : {1, 7, 91, 513}) {
    // 80 heads of 64 + 8 + 8: more than a token block's warps load at once (64).
    for (const Gqa g : {Gqa{1, 1}, Gqa{3, 1}, Gqa{8, 1}, Gqa{9, 3}, Gqa{64, 8}}) {
      for (const int32_t block_size : {1, 3, 16}) {
        const int64_t d = head_dims[case_index++ % 5];
        const int64_t num_blocks = (tokens + block_size - 1) / block_size + 2;
        // Distinct random slots, positions anywhere in a long context; one token has no slot.
        std::vector<int64_t> slots(static_cast<size_t>(num_blocks * block_size));
        std::iota(slots.begin(), slots.end(), 0);
        std::shuffle(slots.begin(), slots.end(), rng);
        ForwardBatch b;
        std::uniform_int_distribution<int32_t> pos_dist(0, 8000);
        for (int64_t t = 0; t < tokens; ++t) {
          b.token_ids.push_back(0);
          b.positions.push_back(pos_dist(rng));
          b.slot_mapping.push_back(tokens > 1 && t == tokens / 2 ? -1 : slots[t]);
        }
        b.query_start = {0, static_cast<int32_t>(tokens)};
        b.context_lens = {static_cast<int32_t>(tokens)};
        b.max_blocks_per_seq = 1;
        b.block_tables = {0};

        const Shape cache_shape = {num_blocks, block_size, g.kv_heads, d};
        const Tensor qkv = random_host({tokens, (g.heads + 2 * g.kv_heads) * d}, rng, -2.0f, 2.0f);
        const Tensor k_init = random_host(cache_shape, rng), v_init = random_host(cache_shape, rng);
        const Tensor inv_freq = inv_freq_host(d, 10000.0f);

        const StepInputs in_gpu = gpu.upload_batch(b);
        const Tensor q_gpu = gpu.alloc({tokens, g.heads, d}, DType::kBF16);
        poison(q_gpu);
        const StepInputs in_cpu = cpu.upload_batch(b);
        const Tensor q_cpu = cpu.alloc({tokens, g.heads, d}, DType::kF32);
        const std::string what = fmt::format("T={} H={} KH={} D={} bs={}{}", tokens, g.heads,
                                             g.kv_heads, d, block_size, fp8 ? " fp8" : "");
        if (fp8) {
          // Caches of NaN bytes and scales (0xFF everywhere): untouched slots stay NaN.
          const KvCacheLayer kv_gpu = cache_layer(gpu, cache_shape, DType::kF8E4M3);
          for (const Tensor* t :
               {&kv_gpu.key, &kv_gpu.value, &kv_gpu.key_scales, &kv_gpu.value_scales}) {
            poison(*t);
          }
          gpu.rope_kv_write(to_backend(gpu, qkv), in_gpu, gpu.upload(inv_freq, DType::kF32), q_gpu,
                            kv_gpu);
          const KvCacheLayer kv_cpu = cache_layer(cpu, cache_shape, DType::kF8E4M3);
          for (const Tensor* t :
               {&kv_cpu.key, &kv_cpu.value, &kv_cpu.key_scales, &kv_cpu.value_scales}) {
            std::memset(t->raw(), 0xff, t->nbytes());
          }
          cpu.rope_kv_write(to_backend(cpu, qkv), in_cpu, inv_freq, q_cpu, kv_cpu);
          expect_close("rope_kv_write.q", what, to_host(gpu, q_gpu), q_cpu);
          expect_fp8_rows_close("rope_kv_write.k_fp8 " + what, download_bytes(gpu, kv_gpu.key),
                                download_bytes(gpu, kv_gpu.key_scales), kv_cpu.key,
                                kv_cpu.key_scales, d);
          // v is not rotated: the same bytes and scales.
          const Tensor v_gpu = download_bytes(gpu, kv_gpu.value);
          EXPECT_EQ(std::memcmp(v_gpu.raw(), kv_cpu.value.raw(), v_gpu.nbytes()), 0)
              << what << ": v bytes";
          const Tensor vs_gpu = download_bytes(gpu, kv_gpu.value_scales);
          EXPECT_EQ(std::memcmp(vs_gpu.raw(), kv_cpu.value_scales.raw(), vs_gpu.nbytes()), 0)
              << what << ": v scales";
          continue;
        }
        const Tensor k_gpu = to_backend(gpu, k_init), v_gpu = to_backend(gpu, v_init);
        gpu.rope_kv_write(to_backend(gpu, qkv), in_gpu, gpu.upload(inv_freq, DType::kF32), q_gpu,
                          {.key = k_gpu, .value = v_gpu});
        const Tensor k_cpu = to_backend(cpu, k_init), v_cpu = to_backend(cpu, v_init);
        cpu.rope_kv_write(to_backend(cpu, qkv), in_cpu, inv_freq, q_cpu,
                          {.key = k_cpu, .value = v_cpu});
        expect_close("rope_kv_write.q", what, to_host(gpu, q_gpu), q_cpu);
        // Whole caches: written slots rotated, every other slot untouched.
        expect_close("rope_kv_write.k_cache", what, to_host(gpu, k_gpu), k_cpu);
        expect_close("rope_kv_write.v_cache", what, to_host(gpu, v_gpu), v_cpu);
      }
    }
  }
}

TEST(CudaOpsTest, RopeKvWrite) {
  INFLIGHT_REQUIRE_CUDA();
  rope_kv_write_cases(/*fp8=*/false);
}

TEST(CudaOpsTest, RopeKvWriteFp8Cache) {
  INFLIGHT_REQUIRE_CUDA();
  rope_kv_write_cases(/*fp8=*/true);
}

struct SeqSpec {
  int32_t context;  // cached + new tokens
  int32_t num_new;
};

struct PagedCase {
  ForwardBatch batch;
  int64_t num_blocks = 0;
  std::vector<bool> readable;  // [num_blocks * block_size]: inside some sequence's context
};

// Sequences on shuffled, non-contiguous blocks, a few spare blocks that nobody owns, and
// block tables padded with -1.
PagedCase make_paged_case(const std::vector<SeqSpec>& seqs, int32_t block_size, std::mt19937& rng) {
  PagedCase c;
  int32_t max_blocks = 0;
  for (const SeqSpec& s : seqs) {
    const int32_t need = (s.context + block_size - 1) / block_size;
    c.num_blocks += need;
    max_blocks = std::max(max_blocks, need);
  }
  c.num_blocks += 3;
  std::vector<int32_t> pool(static_cast<size_t>(c.num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  c.readable.assign(static_cast<size_t>(c.num_blocks * block_size), false);
  ForwardBatch& b = c.batch;
  b.max_blocks_per_seq = max_blocks + 1;
  b.query_start = {0};
  size_t next = 0;
  for (const SeqSpec& s : seqs) {
    std::vector<int32_t> table(static_cast<size_t>(b.max_blocks_per_seq), -1);
    for (int32_t i = 0; i < (s.context + block_size - 1) / block_size; ++i) table[i] = pool[next++];
    for (int32_t p = 0; p < s.context; ++p) {
      const int64_t slot =
          static_cast<int64_t>(table[p / block_size]) * block_size + p % block_size;
      c.readable[static_cast<size_t>(slot)] = true;
      if (p >= s.context - s.num_new) {
        b.token_ids.push_back(0);
        b.positions.push_back(p);
        b.slot_mapping.push_back(slot);
      }
    }
    b.block_tables.insert(b.block_tables.end(), table.begin(), table.end());
    b.context_lens.push_back(s.context);
    b.query_start.push_back(b.query_start.back() + s.num_new);
    b.logits_indices.push_back(b.query_start.back() - 1);
  }
  b.validate(block_size, c.num_blocks);
  return c;
}

// Random e4m3 cache contents (never NaN) with random scales, NaN bytes and scales in every slot
// no sequence may read: the same bytes go to both backends.
struct Fp8Host {
  Tensor values;  // [NB, BS, KH, D] e4m3
  Tensor scales;  // [NB, BS, KH] f32
};
Fp8Host fp8_cache_host(const PagedCase& c, const Shape& shape, std::mt19937& rng) {
  Fp8Host h{Tensor::empty(shape, DType::kF8E4M3),
            Tensor::empty({shape[0], shape[1], shape[2]}, DType::kF32)};
  std::uniform_int_distribution<int> byte(0, 253);
  std::uniform_real_distribution<float> scale(0.0005f, 0.005f);
  const int64_t heads = shape[2], d = shape[3];
  for (size_t slot = 0; slot < c.readable.size(); ++slot) {
    for (int64_t kh = 0; kh < heads; ++kh) {
      const int64_t row = static_cast<int64_t>(slot) * heads + kh;
      uint8_t* v = h.values.data<uint8_t>() + row * d;
      if (!c.readable[slot]) {
        std::fill(v, v + d, uint8_t{0x7f});
        h.scales.data<float>()[row] = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      for (int64_t i = 0; i < d; ++i) {
        const int b = byte(rng);
        v[i] = static_cast<uint8_t>(b + (b >= 0x7f));  // skips 0x7f and 0xff
      }
      h.scales.data<float>()[row] = scale(rng);
    }
  }
  return h;
}

// Random cache contents, NaN in every slot no sequence may read.
Tensor cache_host(const PagedCase& c, const Shape& shape, std::mt19937& rng) {
  Tensor t = random_host(shape, rng);
  const int64_t per_slot = shape[2] * shape[3];
  for (size_t slot = 0; slot < c.readable.size(); ++slot) {
    if (c.readable[slot]) continue;
    float* p = t.data<float>() + static_cast<int64_t>(slot) * per_slot;
    std::fill(p, p + per_slot, std::numeric_limits<float>::quiet_NaN());
  }
  return t;
}

std::vector<SeqSpec> random_decode(int n, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> ctx(1, 200);
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < n; ++i) seqs.push_back({ctx(rng), 1});
  return seqs;
}

// Heads, head_dim and sliding window of one attention case; alibi: random ALiBi slopes.
struct AttentionConfig {
  Gqa gqa;
  int64_t head_dim;
  int32_t window;
  bool alibi = false;
};

// One batch of `seqs` in caches of `block_size`-token blocks through the CUDA and the CPU paged
// attention: random K/V (NaN in every slot no sequence may read), q drawn from [-q_range,
// q_range], scale 1 / sqrt(head_dim); the outputs compared under `metric`, the case named
// `name` and its shape. fp8: an e4m3 cache (the same bytes and scales in both backends).
void expect_attention_matches_cpu(const std::vector<SeqSpec>& seqs, int32_t block_size,
                                  const AttentionConfig& cfg, float q_range, std::mt19937& rng,
                                  const std::string& metric, const std::string& name,
                                  bool fp8 = false) {
  Backend& gpu = cuda_backend();
  Backend& cpu = cpu_backend();
  const PagedCase c = make_paged_case(seqs, block_size, rng);
  const int64_t tokens = c.batch.num_tokens(), heads = cfg.gqa.heads, d = cfg.head_dim;
  const Shape cache_shape = {c.num_blocks, block_size, cfg.gqa.kv_heads, d};
  KvCacheLayer kv_gpu, kv_cpu;
  if (fp8) {
    const Fp8Host k = fp8_cache_host(c, cache_shape, rng), v = fp8_cache_host(c, cache_shape, rng);
    kv_gpu = {upload_bytes(gpu, k.values), upload_bytes(gpu, v.values),
              gpu.upload(k.scales, DType::kF32), gpu.upload(v.scales, DType::kF32)};
    kv_cpu = {k.values, v.values, k.scales, v.scales};  // CPU tensors are host memory
  } else {
    const Tensor k = cache_host(c, cache_shape, rng), v = cache_host(c, cache_shape, rng);
    kv_gpu = {.key = to_backend(gpu, k), .value = to_backend(gpu, v)};
    kv_cpu = {.key = to_backend(cpu, k), .value = to_backend(cpu, v)};
  }
  const Tensor q = random_host({tokens, heads, d}, rng, -q_range, q_range);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // MPT-like slopes, from 2^-8 to 1.
  const Tensor slopes = random_host({heads}, rng, 1.0f / 256, 1.0f);
  const Tensor slopes_gpu = gpu.upload(slopes, DType::kF32);
  const Tensor slopes_cpu = cpu.upload(slopes, DType::kF32);

  const StepInputs in_gpu = gpu.upload_batch(c.batch);
  const Tensor out_gpu = gpu.alloc({tokens, heads, d}, DType::kBF16);
  poison(out_gpu);
  gpu.paged_attention(to_backend(gpu, q), kv_gpu, in_gpu, scale, cfg.window,
                      cfg.alibi ? &slopes_gpu : nullptr, out_gpu);

  const StepInputs in_cpu = cpu.upload_batch(c.batch);
  const Tensor out_cpu = cpu.alloc({tokens, heads, d}, DType::kF32);
  cpu.paged_attention(to_backend(cpu, q), kv_cpu, in_cpu, scale, cfg.window,
                      cfg.alibi ? &slopes_cpu : nullptr, out_cpu);
  expect_close(metric + (fp8 ? ".fp8" : "") + (cfg.alibi ? ".alibi" : ""),
               fmt::format("{} bs={} H={} KH={} D={} window={}", name, block_size, heads,
                           cfg.gqa.kv_heads, d, cfg.window),
               to_host(gpu, out_gpu), out_cpu);
}

void mixed_batch_cases(bool fp8) {
  std::mt19937 rng(fp8 ? 17 : 12);
  const std::vector<std::pair<std::string, std::vector<SeqSpec>>> scenarios = {
      {"decode1", {{1, 1}}},
      {"decode3", {{37, 1}, {5, 1}, {300, 1}}},
      {"decode7", random_decode(7, rng)},
      {"prefill1", {{1, 1}}},
      {"prefill17", {{17, 17}}},
      {"prefill3", {{5, 5}, {33, 33}, {2, 2}}},
      {"chunk1", {{40, 13}}},
      {"chunk2", {{100, 31}, {7, 3}}},
      {"mixed7", {{50, 1}, {17, 17}, {64, 16}, {1, 1}, {129, 1}, {8, 5}, {300, 2}}},
  };
  const int64_t head_dims[] = {64, 128, 80, 256, 8};
  const int32_t windows[] = {0, 7, 0, 1};
  int case_index = 0;
  for (const auto& [name, seqs] : scenarios) {
    for (const int32_t block_size : {1, 3, 16}) {
      for (const Gqa g : {Gqa{4, 4}, Gqa{6, 2}, Gqa{16, 2}, Gqa{9, 3}}) {
        const int64_t d = head_dims[case_index % 5];
        const int32_t window = windows[case_index % 4];
        ++case_index;
        expect_attention_matches_cpu(seqs, block_size, {g, d, window}, 2.0f, rng, "paged_attention",
                                     name, fp8);
      }
    }
  }
}

TEST(CudaOpsTest, PagedAttentionMixedBatches) {
  INFLIGHT_REQUIRE_CUDA();
  mixed_batch_cases(/*fp8=*/false);
}

// The simple kernel (head_dim 80, 256, 8) and the tiles (64, 128) reading e4m3.
TEST(CudaOpsTest, PagedAttentionMixedBatchesFp8Cache) {
  INFLIGHT_REQUIRE_CUDA();
  mixed_batch_cases(/*fp8=*/true);
}

// The tile path's seams: decode tiles with 1..16 rows (several new tokens at small GQA
// ratios), split-KV parts at small batch (rows with no key in a part under a window), prefill
// tiles with partial last tiles, a GQA ratio over 16 (decode through prefill tiles), batch 91,
// and batch 400 (e4m3 grids of three waves or more take 2-warp decode tiles).
// q is drawn from a wide range so that the softmax is peaked even over 8k keys and a key read
// wrongly shows in the output.
void tile_cases(bool fp8) {
  std::mt19937 rng(fp8 ? 18 : 13);
  std::vector<SeqSpec> batch91;
  std::uniform_int_distribution<int32_t> ctx91(1, 400);
  for (int i = 0; i < 91; ++i) batch91.push_back({ctx91(rng), 1});
  std::vector<SeqSpec> batch400;
  std::uniform_int_distribution<int32_t> ctx400(1, 300);
  for (int i = 0; i < 400; ++i) batch400.push_back({ctx400(rng), 1});
  const std::vector<std::pair<std::string, std::vector<SeqSpec>>> scenarios = {
      {"decode8192", {{8192, 1}}},
      {"decode3_long", {{8000, 1}, {1, 1}, {4097, 1}}},
      {"spec4", {{3000, 4}, {64, 2}, {17, 3}}},
      {"chunk129", {{2000, 129}}},
      {"prefill64_7", {{64, 64}, {7, 7}, {1, 1}}},
      {"mixed6", {{1, 1}, {129, 129}, {5000, 7}, {777, 1}, {300, 64}, {8192, 1}}},
      {"decode91", batch91},
      {"decode400", batch400},
  };
  const AttentionConfig configs[] = {
      {{32, 8}, 128, 0}, {{16, 4}, 64, 1000}, {{8, 8}, 128, 7},    {{32, 1}, 64, 0},
      {{32, 4}, 128, 1}, {{8, 2}, 64, 0},     {{16, 16}, 64, 100}, {{32, 8}, 128, 4096},
  };
  int case_index = 0;
  for (const auto& [name, seqs] : scenarios) {
    for (const int32_t block_size : {1, 3, 16}) {
      for (int rep = 0; rep < 2; ++rep) {
        expect_attention_matches_cpu(seqs, block_size, configs[case_index++ % std::size(configs)],
                                     6.0f, rng, "paged_attention.tiles", name, fp8);
      }
    }
  }
}

TEST(CudaOpsTest, PagedAttentionTiles) {
  INFLIGHT_REQUIRE_CUDA();
  tile_cases(/*fp8=*/false);
}

TEST(CudaOpsTest, PagedAttentionTilesFp8Cache) {
  INFLIGHT_REQUIRE_CUDA();
  tile_cases(/*fp8=*/true);
}

// Prompts and chunks of 1..300 new tokens through the prefill tiles, several per batch (the
// grid numbers tiles over all prefill sequences, kv head fastest) next to decodes: lengths
// around the tile heights (16, 64 and 128 rows are 16 / g, 64 / g and 128 / g tokens), chunks
// with a cached prefix that are no multiple of a tile; GQA 1/4/8, head_dim 64/128, windows that
// cut inside and across tiles (masked blocks at the window's start as well as the diagonal).
TEST(CudaOpsTest, PagedAttentionPrefillLengths) {
  INFLIGHT_REQUIRE_CUDA();
  std::mt19937 rng(15);
  const std::vector<std::vector<SeqSpec>> batches = {
      {{1, 1}, {2, 2}, {5, 5}, {16, 16}, {17, 17}},
      {{31, 31}, {32, 32}, {33, 33}, {300, 1}},
      {{63, 63}, {64, 64}, {65, 65}},
      {{127, 127}, {128, 128}, {129, 129}, {50, 1}},
      {{255, 255}, {256, 256}, {257, 257}},
      {{300, 300}, {7, 1}},
      {{500, 100}, {333, 77}, {1000, 3}, {90, 1}},
      {{290, 290}, {299, 299}, {200, 1}, {211, 211}},
  };
  const AttentionConfig configs[] = {
      {{32, 8}, 128, 0}, {{8, 8}, 64, 37}, {{16, 2}, 128, 200}, {{32, 8}, 64, 100},
      {{8, 8}, 128, 0},  {{16, 2}, 64, 0}, {{32, 8}, 128, 65},  {{16, 2}, 128, 1},
  };
  int case_index = 0;
  for (const std::vector<SeqSpec>& seqs : batches) {
    for (const int32_t block_size : {1, 3, 16}) {
      const AttentionConfig& cfg = configs[case_index++ % std::size(configs)];
      expect_attention_matches_cpu(seqs, block_size, cfg, 6.0f, rng, "paged_attention.prefill",
                                   fmt::format("batch {}", case_index / 3));
    }
  }
}

// Prefill long enough for 128-row tiles (the launcher takes them when the longest possible
// prefill fills two CTAs per SM on its own: 5 tiles x 64 kv heads here) next to a decode.
TEST(CudaOpsTest, PagedAttentionTallPrefillTiles) {
  INFLIGHT_REQUIRE_CUDA();
  std::mt19937 rng(14);
  struct Tall {
    int64_t head_dim;
    int32_t block_size, window;
  };
  for (const bool fp8 : {false, true}) {
    for (const Tall t : {Tall{64, 3, 0}, Tall{128, 16, 300}, Tall{128, 1, 0}, Tall{64, 16, 77}}) {
      expect_attention_matches_cpu({{700, 600}, {40, 1}, {1, 1}}, t.block_size,
                                   {{64, 64}, t.head_dim, t.window}, 6.0f, rng,
                                   "paged_attention.tiles", "tall600", fp8);
    }
  }
}

// ALiBi (MPT) through every kernel path against the CPU reference, bf16 and e4m3 caches: the
// simple kernel (head_dim 80, 8), decode tiles with split-KV parts over long contexts, prefill
// tiles (64 and 128 rows, wgmma on sm_90a) and chunks whose prefix is cached (chunked prefill,
// prefix-cache hits: positions are absolute). Heads not a power of two, as in the golden MPT.
TEST(CudaOpsTest, PagedAttentionAlibi) {
  INFLIGHT_REQUIRE_CUDA();
  std::mt19937 rng(19);
  const std::vector<std::pair<std::string, std::vector<SeqSpec>>> scenarios = {
      {"decode1", {{1, 1}}},
      {"decode3_long", {{8000, 1}, {1, 1}, {4097, 1}}},
      {"prefill3", {{5, 5}, {33, 33}, {300, 300}}},
      {"chunk2", {{2000, 129}, {7, 3}}},
      {"mixed6", {{1, 1}, {129, 129}, {5000, 7}, {777, 1}, {300, 64}, {700, 600}}},
  };
  const AttentionConfig configs[] = {
      {{32, 32}, 128, 0, true}, {{6, 6}, 64, 0, true},  {{48, 48}, 128, 0, true},
      {{6, 6}, 80, 0, true},    {{12, 12}, 8, 0, true}, {{64, 64}, 64, 0, true},
  };
  int case_index = 0;
  for (const bool fp8 : {false, true}) {
    for (const auto& [name, seqs] : scenarios) {
      for (const int32_t block_size : {1, 3, 16}) {
        const AttentionConfig& cfg = configs[case_index++ % std::size(configs)];
        expect_attention_matches_cpu(seqs, block_size, cfg, 2.0f, rng, "paged_attention", name,
                                     fp8);
      }
    }
  }
}

}  // namespace
}  // namespace inflight::test
