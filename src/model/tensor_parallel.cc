#include "model/tensor_parallel.h"

#include "core/check.h"

namespace inflight {
namespace {

// Rank r's equal part of `n`; throws when `size` does not divide it.
SliceRange split(int64_t n, int rank, int size, const char* what, const char* key) {
  INFLIGHT_CHECK_CODE(n % size == 0, ErrorCode::kUnsupported,
                      "tensor parallel size {} does not divide the model's {} ({}: {})", size, what,
                      key, n);
  return {rank * (n / size), n / size};
}

}  // namespace

TensorParallelShard TensorParallelShard::of(const ModelConfig& config, int rank, int size) {
  INFLIGHT_CHECK_CODE(size >= 1 && rank >= 0 && rank < size, ErrorCode::kInvalidArgument,
                      "tensor parallel rank {} of {}", rank, size);
  TensorParallelShard s;
  s.rank = rank;
  s.size = size;
  s.vocab_size_ = config.vocab_size;
  s.heads = split(config.num_heads, rank, size, "attention heads", "num_attention_heads");
  const int64_t kv = config.num_kv_heads;
  if (kv % size == 0) {
    s.kv_heads = split(kv, rank, size, "KV heads", "num_key_value_heads");
  } else {
    INFLIGHT_CHECK_CODE(size % kv == 0, ErrorCode::kUnsupported,
                        "tensor parallel size {} and the model's {} KV heads "
                        "(num_key_value_heads): one must divide the other",
                        size, kv);
    s.kv_heads = {rank / (size / kv), 1};  // the KV head of this rank's query heads
  }
  if (config.intermediate_size > 0) {
    s.intermediate = split(config.intermediate_size, rank, size, "MLP width", "intermediate_size");
  }
  if (config.num_experts > 0) {
    s.expert_intermediate = split(config.expert_intermediate_size(), rank, size, "expert MLP width",
                                  "moe_intermediate_size");
  }
  s.vocab = config.vocab_size % size == 0
                ? SliceRange{rank * (config.vocab_size / size), config.vocab_size / size}
                : SliceRange{0, config.vocab_size};
  return s;
}

ModelConfig TensorParallelShard::apply(const ModelConfig& config) const {
  ModelConfig c = config;
  c.num_heads = heads.size;
  c.num_kv_heads = kv_heads.size;
  if (config.intermediate_size > 0) c.intermediate_size = intermediate.size;
  if (config.num_experts > 0) {
    // Mixtral's experts are as wide as intermediate_size: keep the split width explicit.
    c.moe_intermediate_size = expert_intermediate.size;
  }
  c.vocab_size = vocab.size;
  return c;
}

}  // namespace inflight
