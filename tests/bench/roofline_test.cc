// Model costs behind the roofline floors: weights stored, what a batch-1 decode step reads, and
// prefill FLOPs, for dense and mixture-of-experts shapes (published parameter counts).
#include "bench/roofline.h"

#include <gtest/gtest.h>

#include "model/arch_presets.h"

namespace inflight::bench {
namespace {

TEST(ModelCost, DenseReadsEveryWeightButTheEmbedding) {
  const ModelConfig c = *arch_preset("llama-3.1-8b");
  const ModelCost cost = model_cost(c, 2, 1);
  EXPECT_NEAR(static_cast<double>(cost.weight_bytes) / 2, 8.03e9, 0.01e9);
  EXPECT_EQ(cost.weight_bytes - cost.decode_read_bytes, c.vocab_size * c.hidden_size * 2);
}

// MPT-7B: 6.65B parameters, the MLP two matrices (up, down) of 4 d_model, the LM head tied.
TEST(ModelCost, MptHasTheGeluMlpAndATiedHead) {
  const ModelCost cost = model_cost(*arch_preset("mpt-7b"), 2, 1);
  EXPECT_NEAR(static_cast<double>(cost.weight_bytes) / 2, 6.649e9, 0.001e9);
  EXPECT_EQ(cost.decode_read_bytes, cost.weight_bytes);  // tied: the head is the embedding
}

TEST(ModelCost, MixtureOfExpertsReadsOnlyTheChosenExperts) {
  // Mixtral-8x7B: 46.7B parameters, 12.9B active per token (embedding and LM head included).
  const ModelConfig mixtral = *arch_preset("mixtral-8x7b");
  const ModelCost m = model_cost(mixtral, 2, 1);
  EXPECT_NEAR(static_cast<double>(m.weight_bytes) / 2, 46.70e9, 0.01e9);
  const double embed = static_cast<double>(mixtral.vocab_size * mixtral.hidden_size);
  EXPECT_NEAR(static_cast<double>(m.decode_read_bytes) / 2 + embed, 12.88e9, 0.01e9);
  // Qwen3-30B-A3B: 30.5B parameters, 3.3B active.
  const ModelCost q = model_cost(*arch_preset("qwen3-30b-a3b"), 2, 1);
  EXPECT_NEAR(static_cast<double>(q.weight_bytes) / 2, 30.53e9, 0.02e9);
  EXPECT_NEAR(static_cast<double>(q.decode_read_bytes) / 2, 3.04e9, 0.02e9);
  // Prefill computes with the active experts only: ~2 x active parameters per token.
  const ModelCost p = model_cost(mixtral, 2, 1024);
  EXPECT_LT(static_cast<double>(p.prefill_flops), 2.2 * 12.9e9 * 1024);
  EXPECT_GT(static_cast<double>(p.prefill_flops), 2.0 * 12.6e9 * 1024);
}

}  // namespace
}  // namespace inflight::bench
