// The memory plan of each rank under tensor parallelism (model/tensor_parallel.h), counted
// without a GPU: Llama-3.1-70B over 2, 4 and 8 ranks holds 1/T of every split weight on each
// rank (norms, and the KV heads where T exceeds them, replicated), the ranks' weights add up to
// the whole model's plus those replicas, and a rank's KV cache per token is 1/T of the model's.
#include <gtest/gtest.h>

#include "core/check.h"
#include "model/arch_presets.h"
#include "model/llama.h"
#include "model/registry.h"
#include "model/tensor_parallel.h"
#include "runtime/kv_cache.h"

namespace inflight {
namespace {

TEST(TensorParallelPlan, Llama70BSplitsOverTwoFourAndEightRanks) {
  const ModelConfig whole = resolve_architecture(*arch_preset("llama-3.1-70b"));
  ASSERT_EQ(whole.num_kv_heads, 8);
  for (const bool fp8 : {false, true}) {
    const int64_t one_rank = LlamaModel::dummy_weight_bytes(whole, DType::kBF16, fp8);
    const int64_t kv_one_rank = KvCache::bytes_per_block(whole, 16, DType::kBF16);
    // Replicated on every rank: the norms (2 per layer + the final one).
    const int64_t norms = (2 * whole.num_layers + 1) * whole.hidden_size * 2;
    for (const int ranks : {2, 4, 8}) {
      int64_t sum = 0;
      for (int r = 0; r < ranks; ++r) {
        const TensorParallelShard s = TensorParallelShard::of(whole, r, ranks);
        const ModelConfig shard = s.apply(whole);
        EXPECT_EQ(shard.num_heads, 64 / ranks);
        EXPECT_EQ(shard.num_kv_heads, 8 / ranks);
        EXPECT_EQ(shard.intermediate_size, 28672 / ranks);
        EXPECT_EQ(shard.vocab_size, 128256 / ranks);  // 128256 = 2^8 x 501: vocab-parallel
        EXPECT_EQ(s.vocab.begin, r * (128256 / ranks));
        const int64_t bytes = LlamaModel::dummy_weight_bytes(shard, DType::kBF16, fp8);
        sum += bytes;
        // A rank's KV cache per token is 1/T of the whole model's.
        EXPECT_EQ(KvCache::bytes_per_block(shard, 16, DType::kBF16) * ranks, kv_one_rank);
      }
      // FP8 staging (the largest layer, made in bf16 before it is quantized) is per rank.
      const int64_t staging_slack = fp8 ? ranks * int64_t{28672} * 8192 * 2 * 2 : 0;
      EXPECT_GE(sum, one_rank) << ranks << " ranks";
      EXPECT_LE(sum, one_rank + (ranks - 1) * norms + staging_slack) << ranks << " ranks";
      // 70B in bf16 over 2 ranks: ~70.6 GB each, which 80 GB cards hold.
      if (!fp8 && ranks == 2) EXPECT_LT(sum / ranks, int64_t{72} << 30);
    }
  }
}

TEST(TensorParallelPlan, KvHeadsAreReplicatedPastTheirCount) {
  const ModelConfig whole = resolve_architecture(*arch_preset("llama-3.1-70b"));
  for (int r = 0; r < 16; ++r) {
    const TensorParallelShard s = TensorParallelShard::of(whole, r, 16);
    EXPECT_EQ(s.kv_heads.size, 1);
    EXPECT_EQ(s.kv_heads.begin, r / 2) << "ranks 2k and 2k+1 read KV head k";
    EXPECT_EQ(s.heads.begin, r * 4);
  }
}

TEST(TensorParallelPlan, SizesThatDoNotDivideTheModelAreRefusedByName) {
  const ModelConfig whole = resolve_architecture(*arch_preset("llama-3.1-70b"));
  try {
    TensorParallelShard::of(whole, 0, 3);
    ADD_FAILURE() << "3 ranks cannot split 64 heads";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(e.message().find("num_attention_heads"), std::string::npos) << e.message();
  }
  EXPECT_THROW(TensorParallelShard::of(whole, 2, 2), Error);  // rank outside [0, size)
}

}  // namespace
}  // namespace inflight
