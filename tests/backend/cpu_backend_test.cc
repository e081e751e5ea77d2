#include "backend/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <cstring>

#include "runtime/communicator.h"
#include "runtime/kv_cache.h"

namespace inflight {
namespace {

TEST(CpuBackend, UploadBatchViewsEveryArrayInOneBuffer) {
  ForwardBatch b;
  b.token_ids = {10, 11, 12, 13, 14, 15, 19};
  b.positions = {0, 1, 2, 3, 4, 5, 9};
  b.slot_mapping = {28, 29, 30, 31, 8, 9, 13};
  b.query_start = {0, 6, 7};
  b.context_lens = {6, 10};
  b.block_tables = {7, 2, -1, 0, 5, 3};
  b.max_blocks_per_seq = 3;
  b.logits_indices = {5, 6};
  CpuBackend backend;
  const StepInputs in = backend.upload_batch(b);
  auto same = [](const Tensor& t, const auto& v) {
    return t.numel() == static_cast<int64_t>(v.size()) &&
           std::memcmp(t.raw(), v.data(), v.size() * sizeof(v[0])) == 0;
  };
  EXPECT_TRUE(same(in.token_ids, b.token_ids));
  EXPECT_TRUE(same(in.positions, b.positions));
  EXPECT_TRUE(same(in.slot_mapping, b.slot_mapping));
  EXPECT_TRUE(same(in.query_start, b.query_start));
  EXPECT_TRUE(same(in.context_lens, b.context_lens));
  EXPECT_TRUE(same(in.block_tables, b.block_tables));
  EXPECT_TRUE(same(in.logits_indices, b.logits_indices));
  EXPECT_EQ(in.block_tables.shape(), (Shape{2, 3}));
  EXPECT_EQ(in.slot_mapping.dtype(), DType::kI64);
  EXPECT_EQ(in.num_tokens, 7);
  EXPECT_EQ(in.num_seqs, 2);
  EXPECT_EQ(in.num_logits, 2);
  EXPECT_EQ(in.max_query_len, 6);
  EXPECT_EQ(in.max_context_len, 10);
  // All arrays live in one allocation, 64-byte aligned.
  EXPECT_EQ(in.token_ids.owner(), in.logits_indices.owner());
  for (const Tensor* t : {&in.token_ids, &in.positions, &in.slot_mapping, &in.block_tables}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw()) % 64, 0u);
  }
}

TEST(CpuBackend, UploadAndDownloadRoundTripAndRejectOtherDtypes) {
  CpuBackend backend;
  Tensor host = Tensor::empty({3, 5}, DType::kF32);
  for (int i = 0; i < 15; ++i) host.data<float>()[i] = static_cast<float>(i) * 0.5f - 3.0f;
  const Tensor dev = backend.upload(host, DType::kF32);
  EXPECT_NE(dev.raw(), host.raw());
  Tensor back = Tensor::empty({3, 5}, DType::kF32);
  backend.download_f32(dev, back);
  backend.synchronize();
  EXPECT_EQ(std::memcmp(back.raw(), host.raw(), host.nbytes()), 0);
  EXPECT_THROW(backend.upload(host, DType::kBF16), Error);
  Tensor wrong = Tensor::empty({5, 3}, DType::kF32);
  EXPECT_THROW(backend.download_f32(dev, wrong), Error);
}

TEST(KvCache, LayersAreDisjointViewsOfOneAllocation) {
  CpuBackend backend;
  KvCache cache(backend, 3, 5, 16, 2, 8, DType::kF32);
  EXPECT_EQ(cache.num_layers(), 3);
  EXPECT_EQ(cache.key(0).shape(), (Shape{5, 16, 2, 8}));
  EXPECT_FALSE(cache.layer(0).key_scales.defined());
  const size_t layer_bytes = 5 * 16 * 2 * 8 * sizeof(float);
  std::vector<const char*> starts;
  for (int64_t l = 0; l < 3; ++l) {
    starts.push_back(static_cast<const char*>(cache.key(l).raw()));
    starts.push_back(static_cast<const char*>(cache.value(l).raw()));
  }
  for (size_t i = 1; i < starts.size(); ++i) EXPECT_EQ(starts[i] - starts[i - 1], layer_bytes);
  EXPECT_THROW(cache.key(3), Error);
  EXPECT_THROW(KvCache(backend, 3, 0, 16, 2, 8, DType::kF32), Error);
  // A cache holds the compute dtype or e4m3, nothing else.
  EXPECT_THROW(KvCache(backend, 3, 5, 16, 2, 8, DType::kBF16), Error);
  ModelConfig c;
  c.num_layers = 30;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  EXPECT_EQ(KvCache::bytes_per_block(c, 16, DType::kBF16), 2 * 30 * 16 * 3 * 64 * 2);
  // e4m3: a byte per element and a f32 scale per (token, kv head).
  EXPECT_EQ(KvCache::bytes_per_block(c, 16, DType::kF8E4M3), 2 * 30 * 16 * 3 * (64 + 4));
  EXPECT_EQ(KvCache::dtype_for(c, backend), DType::kF32);
  c.quantization.fp8_kv_cache = true;
  EXPECT_EQ(KvCache::dtype_for(c, backend), DType::kF8E4M3);
}

TEST(KvCache, Fp8CacheKeepsAScalePerTokenAndKvHead) {
  CpuBackend backend;
  KvCache cache(backend, 2, 5, 16, 2, 8, DType::kF8E4M3);
  EXPECT_EQ(cache.dtype(), DType::kF8E4M3);
  for (int64_t l = 0; l < 2; ++l) {
    const KvCacheLayer& layer = cache.layer(l);
    EXPECT_EQ(layer.key.dtype(), DType::kF8E4M3);
    EXPECT_EQ(layer.key_scales.shape(), (Shape{5, 16, 2}));
    EXPECT_EQ(layer.value_scales.dtype(), DType::kF32);
    EXPECT_NE(layer.key_scales.raw(), layer.value_scales.raw());
  }
  EXPECT_EQ(static_cast<const char*>(cache.layer(1).key_scales.raw()) -
                static_cast<const char*>(cache.layer(0).key_scales.raw()),
            2 * 5 * 16 * 2 * sizeof(float));
}

TEST(CpuBackend, HasOneStream) {
  CpuBackend backend;
  EXPECT_EQ(backend.num_streams(), 1);
  EXPECT_NO_THROW(backend.set_stream(0));
  EXPECT_THROW(backend.set_stream(1), Error);
  EXPECT_THROW(backend.set_stream(-1), Error);
  EXPECT_EQ(backend.current_stream(), 0);
  EXPECT_NO_THROW(backend.join_stream(0, 0));
}

// One rank: every collective is the identity, and there is no peer to talk to.
TEST(SingleRankCommunicator, CollectivesOfOneRank) {
  CpuBackend backend;
  SingleRankCommunicator comm(backend);
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world_size(), 1);
  Tensor t = Tensor::empty({2, 3}, DType::kF32);
  for (int i = 0; i < 6; ++i) t.data<float>()[i] = static_cast<float>(i) - 2.5f;
  const Tensor copy = backend.upload(t, DType::kF32);
  comm.all_reduce(t, ReduceOp::kSum);
  EXPECT_EQ(std::memcmp(t.raw(), copy.raw(), t.nbytes()), 0);
  Tensor gathered = Tensor::empty({2, 3}, DType::kF32);
  comm.all_gather(t, gathered);
  EXPECT_EQ(std::memcmp(gathered.raw(), t.raw(), t.nbytes()), 0);
  Tensor scattered = Tensor::empty({2, 3}, DType::kF32);
  comm.reduce_scatter(t, scattered);
  EXPECT_EQ(std::memcmp(scattered.raw(), t.raw(), t.nbytes()), 0);
  EXPECT_NO_THROW(comm.broadcast(t, 0));
  EXPECT_THROW(comm.broadcast(t, 1), Error);
  EXPECT_THROW(comm.send(t, 1), Error);
  EXPECT_THROW(comm.recv(t, 1), Error);
}

}  // namespace
}  // namespace inflight
