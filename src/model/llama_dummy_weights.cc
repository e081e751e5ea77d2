// LlamaModel's dummy weights (model/llama.h), for performance work: the real architectures'
// shapes with random values made on the device (Backend::fill_random), and the bytes they take.
//
// Each tensor draws from its own stream of the generator (seed and a running index), and every
// rank and stage walks the whole model in the same order: a rank's slice of a tensor holds the
// values the unsplit model has there, whatever the tensor and pipeline parallel sizes.
// Scales keep activations finite through any number of layers: linear layers uniform
// +-1/sqrt(whole fan-in), norm weights 1 +- 0.1, biases +-0.1, embeddings +-1.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/check.h"
#include "model/linear_loader.h"
#include "model/llama.h"
#include "model/weight_plan.h"

namespace inflight {

bool LlamaModel::quantizes_dummy_linears() const {
  // Dummy weights of any FP8 config are quantized online (per channel unless --quantization
  // fp8-tensor / fp8-block asked otherwise).
  if (!config_.quantization.enabled()) return false;
  INFLIGHT_CHECK_CODE(backend_.supports_fp8(), ErrorCode::kUnsupported,
                      "--quantization fp8: the {} backend has no FP8 GEMMs (CUDA needs compute "
                      "capability 8.9 or newer)",
                      backend_.name());
  return true;
}

int64_t LlamaModel::dummy_weight_bytes() const {
  return dummy_weight_bytes(local_, backend_.compute_dtype(), quantizes_dummy_linears(),
                            stage_.first(), stage_.last());
}

int64_t LlamaModel::dummy_weight_bytes(const ModelConfig& c, DType dtype, bool fp8,
                                       bool first_stage, bool last_stage) {
  // Bounded by ModelConfig::num_weight_elements (validated), so nothing here overflows.
  const int64_t hidden = c.hidden_size, q_dim = c.num_heads * c.head_dim;
  const int64_t qkv_rows = q_dim + 2 * c.num_kv_heads * c.head_dim;
  const auto dt = static_cast<int64_t>(dtype_size(dtype));
  // FP8 linear layers: one byte per weight and an f32 scale per row; the largest is made in the
  // compute dtype first. The dense MLP is a linear layer (FP8 with the rest), and so are the
  // experts' stacked weights; the router stays unquantized.
  const bool experts = c.num_experts > 0;
  const int64_t mlp_inter = experts ? 0 : c.intermediate_size;
  const int64_t expert_rows = c.num_experts * 2 * c.expert_intermediate_size();  // gate/up
  // Up and down (GELU), or gate, up and down: MLP matrices of I x hidden.
  const int64_t mlp_mats = c.mlp == ModelConfig::Mlp::kGelu ? 2 : 3;
  const int64_t linear_rows = qkv_rows + hidden + mlp_mats * mlp_inter;
  const int64_t linear = qkv_rows * hidden + hidden * q_dim + mlp_mats * mlp_inter * hidden;
  int64_t layer = 2 * hidden * dt + (fp8 ? linear + 4 * linear_rows : linear * dt);
  if (c.attention_bias) layer += qkv_rows * dt;
  if (c.o_proj_bias) layer += hidden * dt;
  if (c.mlp_bias) layer += (mlp_inter + hidden) * dt;
  if (c.norm_bias) layer += 2 * hidden * dt;
  if (c.qk_norm) layer += 2 * c.head_dim * dt;
  if (experts) {
    const int64_t expert_weights = 3 * c.num_experts * c.expert_intermediate_size() * hidden;
    const int64_t scale_rows = expert_rows + c.num_experts * hidden;  // gate/up, down
    layer += c.num_experts * hidden * dt +                            // the router
             (fp8 ? expert_weights + 4 * scale_rows : expert_weights * dt);
  }
  const int64_t embed = c.vocab_size * hidden;
  const int64_t largest =
      std::max({qkv_rows * hidden, hidden * q_dim, 2 * mlp_inter * hidden, expert_rows * hidden});
  const int64_t staging = fp8 ? largest * dt : 0;
  // The embedding on the first stage (and the last, when tied), the final norm and an untied
  // head on the last.
  const bool tied = c.tie_word_embeddings;
  int64_t ends = first_stage || (last_stage && tied) ? embed : 0;
  if (last_stage) ends += (tied ? 0 : embed) + (c.norm_bias ? 2 : 1) * hidden;
  return c.num_layers * layer + ends * dt + staging;
}

void LlamaModel::init_random_weights(uint64_t seed) {
  const ModelConfig& c = local_;   // this rank's shard
  const ModelConfig& w = config_;  // the whole model, whose values each rank's slice takes
  const TensorParallelShard& s = shard_;
  const int64_t hidden = c.hidden_size, q_dim = c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim, inter = c.intermediate_size;
  const int64_t d = c.head_dim, whole_q = w.num_heads * d, whole_kv = w.num_kv_heads * d;
  const DType dt = backend_.compute_dtype();
  check_weights_fit(backend_, dummy_weight_bytes(), "the model's dummy weights");
  uint64_t index = 0;
  // Whether this rank holds the tensor being made: every rank walks the whole model in the same
  // order, so that each tensor's stream index is the same on every rank and stage, and makes
  // only its stage's tensors.
  bool keep = true;
  // One block of a dummy tensor: rows of `local` (2-D) take the values of the whole tensor
  // (`whole_cols` wide) from row `row`, column `col` on. Under tensor parallelism every rank's
  // slices hold the values the unsplit model has there.
  struct Block {
    Tensor local;
    int64_t row = 0, col = 0, whole_cols = 0;
  };
  // Each tensor gets its own stream of the generator: seed and running index mixed, in the same
  // order on every rank.
  auto fill = [&](const std::vector<Block>& blocks, float scale, float offset) {
    const uint64_t stream = seed * 0x9e3779b97f4a7c15ULL + ++index;
    if (!keep) return;
    for (const Block& b : blocks) {
      backend_.fill_random(b.local, stream, scale, offset,
                           {b.row * b.whole_cols + b.col, b.local.size(1), b.whole_cols});
    }
  };
  auto make = [&](const Shape& shape, float scale, float offset) {
    if (!keep) {
      ++index;
      return Tensor();
    }
    Tensor t = backend_.alloc(shape, dt);
    fill({{t.reshape({1, t.numel()}), 0, 0, t.numel()}}, scale, offset);
    return t;
  };
  // --quantization fp8-* quantizes each linear layer as it is made (model/linear_loader.h); the
  // dummy weights of an FP8 checkpoint's config per channel.
  const bool fp8 = quantizes_dummy_linears();
  const OnlineFp8Scheme scheme = config_.quantization.source == "online"
                                     ? OnlineFp8Scheme::of(config_.quantization)
                                     : OnlineFp8Scheme{};
  // A weight [out, in] of this rank, filled by `blocks(t)` with scale 1/sqrt(whole fan-in).
  auto weight = [&](int64_t out, int64_t in, int64_t whole_in,
                    const std::function<std::vector<Block>(const Tensor&)>& blocks) {
    if (!keep) {
      ++index;
      return Tensor();
    }
    Tensor t = backend_.alloc({out, in}, dt);
    fill(blocks(t), 1.0f / std::sqrt(static_cast<float>(whole_in)), 0.0f);
    return t;
  };
  auto linear = [&](const Tensor& t) {
    if (!t.defined()) return Linear();
    if (fp8) return quantize_linear_online(backend_, t, scheme);
    Linear l;
    l.weight = t;
    return l;
  };
  // Rows [begin, end) of t as a block of the whole from row `row`.
  auto rows = [](const Tensor& t, int64_t begin, int64_t end, int64_t row) {
    return Block{t.rows(begin, end), row, 0, t.size(1)};
  };
  auto norm = [&]() { return make({hidden}, 0.1f, 1.0f); };

  const int64_t v0 = s.vocab.begin, vocab = c.vocab_size;
  auto vocab_rows = [&](const Tensor& t) { return std::vector<Block>{rows(t, 0, vocab, v0)}; };
  // The embedding on the first stage (and the last, when tied); final norm and head on the last.
  keep = stage_.first() || (stage_.last() && c.tie_word_embeddings);
  if (keep) embed_ = backend_.alloc({vocab, hidden}, dt);
  fill(keep ? vocab_rows(embed_) : std::vector<Block>{}, 1.0f, 0.0f);
  keep = stage_.last();
  final_norm_ = norm();
  if (c.norm_bias) final_norm_bias_ = make({hidden}, 0.1f, 0.0f);
  lm_head_.weight = c.tie_word_embeddings ? (keep ? embed_ : Tensor())
                                          : weight(vocab, hidden, hidden, vocab_rows);
  set_positions(nullptr);

  // This rank's q, k, v rows of the fused [q; k; v] (rows of the whole from those offsets).
  const int64_t q0 = s.heads.begin * d, kv0 = s.kv_heads.begin * d;
  auto qkv_rows = [&](const Tensor& t) {
    return std::vector<Block>{
        rows(t, 0, q_dim, q0), rows(t, q_dim, q_dim + kv_dim, whole_q + kv0),
        rows(t, q_dim + kv_dim, q_dim + 2 * kv_dim, whole_q + whole_kv + kv0)};
  };
  const int64_t i0 = s.intermediate.begin;
  layers_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t l = 0; l < w.num_layers; ++l) {
    keep = l >= stage_.layer_begin && l < stage_.layer_end;
    Layer skipped;
    Layer& layer = keep ? layers_[static_cast<size_t>(l - stage_.layer_begin)] : skipped;
    layer.input_norm = norm();
    layer.post_norm = norm();
    if (c.norm_bias) {
      layer.input_norm_bias = make({hidden}, 0.1f, 0.0f);
      layer.post_norm_bias = make({hidden}, 0.1f, 0.0f);
    }
    layer.qkv = linear(weight(q_dim + 2 * kv_dim, hidden, hidden, qkv_rows));
    if (has_qkv_bias()) {
      if (keep) layer.qkv.bias = backend_.alloc({q_dim + 2 * kv_dim}, dt);
      fill(keep ? qkv_rows(layer.qkv.bias.reshape({q_dim + 2 * kv_dim, 1})) : std::vector<Block>{},
           0.1f, 0.0f);
    }
    layer.o = linear(weight(hidden, q_dim, whole_q, [&](const Tensor& t) {
      return std::vector<Block>{{t, 0, q0, whole_q}};
    }));
    // A row-parallel layer's bias on rank 0 only (every rank draws its stream alike).
    auto row_parallel_bias = [&](Linear& l) {
      const bool held = keep;
      keep = keep && s.rank == 0;
      const Tensor b = make({hidden}, 0.1f, 0.0f);
      if (keep) l.bias = b;
      keep = held;
    };
    if (c.o_proj_bias) row_parallel_bias(layer.o);
    if (c.qk_norm) {
      layer.q_norm = make({d}, 0.1f, 1.0f);
      layer.k_norm = make({d}, 0.1f, 1.0f);
    }
    if (!has_experts()) {
      if (gelu_mlp()) {  // up alone
        layer.gate_up = linear(weight(inter, hidden, hidden, [&](const Tensor& t) {
          return std::vector<Block>{rows(t, 0, inter, i0)};
        }));
      } else {
        layer.gate_up = linear(weight(2 * inter, hidden, hidden, [&](const Tensor& t) {
          return std::vector<Block>{rows(t, 0, inter, i0),
                                    rows(t, inter, 2 * inter, w.intermediate_size + i0)};
        }));
      }
      layer.down = linear(weight(hidden, inter, w.intermediate_size, [&](const Tensor& t) {
        return std::vector<Block>{{t, 0, i0, w.intermediate_size}};
      }));
      if (c.mlp_bias) {
        if (keep) layer.gate_up.bias = backend_.alloc({inter}, dt);
        fill(keep ? std::vector<Block>{rows(layer.gate_up.bias.reshape({inter, 1}), 0, inter, i0)}
                  : std::vector<Block>{},
             0.1f, 0.0f);
        row_parallel_bias(layer.down);
      }
      continue;
    }
    const int64_t e = c.num_experts, ie = c.expert_intermediate_size();
    const int64_t whole_ie = w.expert_intermediate_size(), e0 = s.expert_intermediate.begin;
    layer.router.weight = weight(
        e, hidden, hidden, [&](const Tensor& t) { return std::vector<Block>{rows(t, 0, e, 0)}; });
    // Expert x's gate and up rows of the whole [E 2 I_e, hidden], and its down columns.
    const Tensor gate_up = weight(e * 2 * ie, hidden, hidden, [&](const Tensor& t) {
      std::vector<Block> b;
      for (int64_t x = 0; x < e; ++x) {
        b.push_back(rows(t, x * 2 * ie, x * 2 * ie + ie, x * 2 * whole_ie + e0));
        b.push_back(rows(t, x * 2 * ie + ie, (x + 1) * 2 * ie, x * 2 * whole_ie + whole_ie + e0));
      }
      return b;
    });
    const Tensor down = weight(e * hidden, ie, whole_ie, [&](const Tensor& t) {
      return std::vector<Block>{{t, 0, e0, whole_ie}};
    });
    if (keep) {
      layer.experts_gate_up = linear(gate_up);
      layer.experts_gate_up.weight = layer.experts_gate_up.weight.reshape({e, 2 * ie, hidden});
      layer.experts_down = linear(down);
      layer.experts_down.weight = layer.experts_down.weight.reshape({e, hidden, ie});
    }
  }
  fp8_ = fp8;
}

}  // namespace inflight
