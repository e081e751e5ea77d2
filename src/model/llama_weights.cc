// LlamaModel's weights from a checkpoint (model/llama.h): the tensors the config implies, this
// rank's slices of them (model/tensor_parallel.h) and this stage's layers
// (model/pipeline_stage.h), loaded into the backend's weight format.
//
// Two passes, so that a config the files do not back fails before anything is allocated:
//   1. plan: every stored tensor looked up by name and its whole shape checked; fused q/k/v and
//      gate/up planned as parts stacked along the first dimension of one device tensor;
//   2. load: the planned bytes checked against the device (check_weights_fit), then the layers
//      allocated and each planned weight loaded.
// Linear layers and the experts' stacked weights keep their stored format (FP8 with its scales:
// model/linear_loader.h); norms, biases, the embedding and the router are kept in the compute
// dtype.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "formats/stored_slice.h"
#include "model/linear_loader.h"
#include "model/llama.h"
#include "model/weight_plan.h"

namespace inflight {

namespace {

std::string layer_name(int64_t layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

// Where a checkpoint keeps a layer's experts: "<block>.gate.weight" (the router) and
// "<block>.experts.<e>.<proj>.weight". GGUF files use the second layout's names
// (formats/gguf_model_files.h), with the experts stacked.
struct MoeLayout {
  const char* block;
  const char* gate;
  const char* up;
  const char* down;
};
constexpr MoeLayout kMixtralLayout{"block_sparse_moe", "w1", "w3", "w2"};
constexpr MoeLayout kQwenMoeLayout{"mlp", "gate_proj", "up_proj", "down_proj"};

std::string expert_name(int64_t layer, const MoeLayout& m, int64_t expert, const char* proj) {
  return fmt::format("model.layers.{}.{}.experts.{}.{}.weight", layer, m.block, expert, proj);
}

}  // namespace

void LlamaModel::load_weights(const WeightSource& source) {
  const ModelConfig& c = config_;  // the stored shapes; this rank loads slices of them
  const int64_t hidden = c.hidden_size, q_dim = c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim, inter = c.intermediate_size;
  const int64_t experts = c.num_experts, expert_inter = c.expert_intermediate_size();
  const TensorParallelShard& s = shard_;
  // Per-expert names, or slices of the stacked experts of a GGUF file.
  const WeightSource weights = with_stacked_experts(source);
  // A stored tensor: its name, its whole shape (checked), and the rows or columns of it this
  // rank holds (model/tensor_parallel.h).
  enum class Cut { kWhole, kRows, kCols };
  struct Part {
    std::string name;
    Shape shape;
    Cut cut = Cut::kWhole;
    SliceRange range;
  };
  const auto heads = [&](SliceRange r) {
    return SliceRange{r.begin * c.head_dim, r.size * c.head_dim};
  };
  const Cut vocab_cut = s.vocab_parallel() ? Cut::kRows : Cut::kWhole;
  // A planned weight: its device bytes, and how it is loaded once the layers exist (they are
  // allocated only after the plan has passed).
  struct Planned {
    int64_t bytes;
    std::function<void()> load;
  };
  // Pass 1, nothing allocated: every stored tensor looked up and shape-checked, so that a
  // config the files do not back fails here, naming the field and the first missing tensor.
  std::vector<Planned> plan;
  // The parts stacked along their first dimension into one device tensor; nullopt when a part
  // is absent and !required.
  auto stack = [&](const std::vector<Part>& parts, bool required) -> std::optional<PlannedWeight> {
    PlannedWeight w;
    for (const Part& p : parts) {
      std::optional<StoredTensor> t = weights(p.name);
      if (!t) {
        if (!required) return std::nullopt;
        INFLIGHT_THROW(ErrorCode::kNotFound, "weight '{}' is missing", p.name);
      }
      INFLIGHT_CHECK_CODE(t->shape == p.shape, ErrorCode::kInvalidFile,
                          "weight '{}' has shape {}, expected {} for this config", p.name,
                          shape_str(t->shape), shape_str(p.shape));
      if (p.cut == Cut::kRows) *t = slice_rows(*t, p.range.begin, p.range.end());
      if (p.cut == Cut::kCols) *t = slice_cols(*t, p.range.begin, p.range.end());
      w.parts.push_back(std::move(*t));
    }
    w.shape = w.parts.front().shape;
    w.shape[0] = 0;
    for (const StoredTensor& p : w.parts) w.shape[0] += p.shape[0];
    w.dtype = backend_.weight_dtype(w.parts.front());
    return w;
  };
  // A tensor that is not a linear layer's weight (norms, biases, embedding, router):
  // kept in the compute dtype, so a stored e4m3 one is dequantized with its scales.
  auto add = [&](std::function<Tensor&()> destination, const std::vector<Part>& parts,
                 bool required) {
    std::optional<PlannedWeight> w = stack(parts, required);
    if (!w) return;
    w->dtype = backend_.compute_dtype();
    const int64_t bytes = w->bytes();
    plan.push_back(Planned{bytes, [this, destination, w = std::move(*w)] {
                             destination() = load_planned(backend_, w);
                           }});
  };
  auto one = [&](std::function<Tensor&()> destination, const std::string& name,
                 const Shape& shape) {
    add(std::move(destination), {{name, shape}}, true);
  };
  // A linear layer's weight (quantized or not: model/linear_loader.h), or the stacked weights of
  // a layer's experts; its bias is planned separately.
  // Online FP8 loads a weight in the compute dtype first: the largest such copy is on the
  // device beside the weights loaded before it (a layer's stacked experts, for a mixture).
  int64_t staging = 0;
  auto linear = [&](std::function<Linear&()> destination, const std::vector<Part>& parts) {
    PlannedLinear w =
        plan_linear(backend_, c.quantization, parts.front().name, std::move(*stack(parts, true)));
    if (w.quantize_online) {
      auto staged = static_cast<int64_t>(dtype_size(backend_.compute_dtype()));
      for (const int64_t d : w.weight.shape) staged *= d;
      staging = std::max(staging, staged);
    }
    const int64_t bytes = w.bytes();
    plan.push_back(Planned{
        bytes, [this, destination, w = std::move(w)] { load_linear(backend_, w, destination()); }});
  };
  // The tensor (linear layer) `member` picks out of layer `l` (of the model; this stage's
  // layers_ start at stage_.layer_begin).
  auto in_layer = [this](int64_t l, auto member) {
    return [this, l, member]() -> decltype(auto) {
      return member(layers_[static_cast<size_t>(l - stage_.layer_begin)]);
    };
  };

  // The embedding on the first stage (and on the last when the LM head is tied to it).
  if (stage_.first() || (stage_.last() && c.tie_word_embeddings)) {
    add([this]() -> Tensor& { return embed_; },
        {{"model.embed_tokens.weight", {c.vocab_size, hidden}, vocab_cut, s.vocab}}, true);
  }
  if (stage_.last()) {
    one([this]() -> Tensor& { return final_norm_; }, "model.norm.weight", {hidden});
    if (c.norm_bias) {
      one([this]() -> Tensor& { return final_norm_bias_; }, "model.norm.bias", {hidden});
    }
    // Tied: the LM head is the embedding itself, one device copy.
    if (!c.tie_word_embeddings) {
      add([this]() -> Tensor& { return lm_head_.weight; },
          {{"lm_head.weight", {c.vocab_size, hidden}, vocab_cut, s.vocab}}, true);
    }
  }
  // Llama 3.1 GGUF files carry their rope scaling as per-pair frequency divisors instead of
  // config keys (formats/model_files.h).
  std::optional<StoredTensor> divisors = weights("rope_freqs.weight");
  if (divisors) {
    INFLIGHT_CHECK_CODE(divisors->numel() == c.head_dim / 2, ErrorCode::kInvalidFile,
                        "weight 'rope_freqs.weight' has shape {}, expected [{}]",
                        shape_str(divisors->shape), c.head_dim / 2);
  }
  const MoeLayout& m =
      weights("model.layers.0.block_sparse_moe.gate.weight") ? kMixtralLayout : kQwenMoeLayout;
  // MPT stores q/k/v as one tensor (HF Wqkv, GGUF attn_qkv).
  const bool fused_qkv = c.architecture == "mpt";
  for (int64_t l = stage_.layer_begin; l < stage_.layer_end; ++l) {
    auto name = [l](const char* suffix) { return layer_name(l, suffix); };
    // A layer without its first tensor is one the config counts and the files do not hold
    // (num_hidden_layers: 10^9 over 30 layers of tensors); a tensor missing inside a layer is
    // just missing (below).
    INFLIGHT_CHECK_CODE(l == 0 || weights(name("input_layernorm.weight")).has_value(),
                        ErrorCode::kInvalidFile,
                        "model config: num_layers (num_hidden_layers) is {}, but the weights "
                        "hold layers 0..{} only: '{}' is missing",
                        c.num_layers, l - 1, name("input_layernorm.weight"));
    one(in_layer(l, [](Layer& x) -> Tensor& { return x.input_norm; }),
        name("input_layernorm.weight"), {hidden});
    one(in_layer(l, [](Layer& x) -> Tensor& { return x.post_norm; }),
        name("post_attention_layernorm.weight"), {hidden});
    if (c.norm_bias) {
      one(in_layer(l, [](Layer& x) -> Tensor& { return x.input_norm_bias; }),
          name("input_layernorm.bias"), {hidden});
      one(in_layer(l, [](Layer& x) -> Tensor& { return x.post_norm_bias; }),
          name("post_attention_layernorm.bias"), {hidden});
    }
    // Column-parallel q/k/v (this rank's heads), row-parallel o.
    const SliceRange q_rows = heads(s.heads), kv_rows = heads(s.kv_heads);
    // This rank's q, k, v rows of the weight (bias: false) or of the bias: three tensors, or
    // MPT's fused [q; k; v] cut three times.
    auto qkv_parts = [&](bool weight) {
      const char* kind = weight ? "weight" : "bias";
      const auto shape = [&](int64_t rows) { return weight ? Shape{rows, hidden} : Shape{rows}; };
      const auto proj = [&](const char* p) {
        return layer_name(l, fmt::format("self_attn.{}.{}", p, kind).c_str());
      };
      if (!fused_qkv) {
        return std::vector<Part>{{proj("q_proj"), shape(q_dim), Cut::kRows, q_rows},
                                 {proj("k_proj"), shape(kv_dim), Cut::kRows, kv_rows},
                                 {proj("v_proj"), shape(kv_dim), Cut::kRows, kv_rows}};
      }
      const std::string fused = proj("qkv_proj");
      const Shape whole = shape(q_dim + 2 * kv_dim);
      return std::vector<Part>{
          {fused, whole, Cut::kRows, q_rows},
          {fused, whole, Cut::kRows, {q_dim + kv_rows.begin, kv_rows.size}},
          {fused, whole, Cut::kRows, {q_dim + kv_dim + kv_rows.begin, kv_rows.size}}};
    };
    linear(in_layer(l, [](Layer& x) -> Linear& { return x.qkv; }), qkv_parts(/*weight=*/true));
    if (has_qkv_bias()) {
      add(in_layer(l, [](Layer& x) -> Tensor& { return x.qkv.bias; }), qkv_parts(/*weight=*/false),
          true);
    }
    linear(in_layer(l, [](Layer& x) -> Linear& { return x.o; }),
           {{name("self_attn.o_proj.weight"), {hidden, q_dim}, Cut::kCols, q_rows}});
    // A row-parallel layer's bias is added once, by rank 0.
    if (c.o_proj_bias && s.rank == 0)
      add(in_layer(l, [](Layer& x) -> Tensor& { return x.o.bias; }),
          {{name("self_attn.o_proj.bias"), {hidden}}}, false);
    if (c.qk_norm) {
      one(in_layer(l, [](Layer& x) -> Tensor& { return x.q_norm; }),
          name("self_attn.q_norm.weight"), {c.head_dim});
      one(in_layer(l, [](Layer& x) -> Tensor& { return x.k_norm; }),
          name("self_attn.k_norm.weight"), {c.head_dim});
    }
    if (!has_experts()) {
      std::vector<Part> gate_up;
      if (!gelu_mlp()) {
        gate_up.push_back(
            {name("mlp.gate_proj.weight"), {inter, hidden}, Cut::kRows, s.intermediate});
      }
      gate_up.push_back({name("mlp.up_proj.weight"), {inter, hidden}, Cut::kRows, s.intermediate});
      linear(in_layer(l, [](Layer& x) -> Linear& { return x.gate_up; }), gate_up);
      linear(in_layer(l, [](Layer& x) -> Linear& { return x.down; }),
             {{name("mlp.down_proj.weight"), {hidden, inter}, Cut::kCols, s.intermediate}});
      if (c.mlp_bias) {  // up column-parallel; down row-parallel, added by rank 0
        add(in_layer(l, [](Layer& x) -> Tensor& { return x.gate_up.bias; }),
            {{name("mlp.up_proj.bias"), {inter}, Cut::kRows, s.intermediate}}, true);
        if (s.rank == 0) {
          add(in_layer(l, [](Layer& x) -> Tensor& { return x.down.bias; }),
              {{name("mlp.down_proj.bias"), {hidden}}}, true);
        }
      }
      continue;
    }
    // Experts, stacked along the first dimension: [gate_0; up_0; gate_1; up_1; ...] and
    // [down_0; down_1; ...], viewed as [E, 2 I_e, hidden] and [E, hidden, I_e] once loaded.
    one(in_layer(l, [](Layer& x) -> Tensor& { return x.router.weight; }),
        fmt::format("model.layers.{}.{}.gate.weight", l, m.block), {experts, hidden});
    std::vector<Part> gate_up, down;
    const SliceRange ie = s.expert_intermediate;
    for (int64_t e = 0; e < experts; ++e) {
      gate_up.push_back({expert_name(l, m, e, m.gate), {expert_inter, hidden}, Cut::kRows, ie});
      gate_up.push_back({expert_name(l, m, e, m.up), {expert_inter, hidden}, Cut::kRows, ie});
      down.push_back({expert_name(l, m, e, m.down), {hidden, expert_inter}, Cut::kCols, ie});
    }
    linear(in_layer(l, [](Layer& x) -> Linear& { return x.experts_gate_up; }), gate_up);
    linear(in_layer(l, [](Layer& x) -> Linear& { return x.experts_down; }), down);
  }

  // Pass 2: the device must hold them all; then allocate and load.
  int64_t bytes = staging;
  for (const Planned& p : plan) bytes += p.bytes;
  check_weights_fit(backend_, bytes, "the model's weights");
  layers_.resize(static_cast<size_t>(local_.num_layers));
  // (load_linear leaves a layer's bias alone, whichever is loaded first.)
  for (const Planned& p : plan) p.load();
  if (c.tie_word_embeddings && stage_.last()) lm_head_.weight = embed_;
  if (has_experts()) {
    const int64_t ie = local_.expert_intermediate_size();
    for (Layer& layer : layers_) {
      layer.experts_gate_up.weight =
          layer.experts_gate_up.weight.reshape({experts, 2 * ie, hidden});
      layer.experts_down.weight = layer.experts_down.weight.reshape({experts, hidden, ie});
    }
  }
  fp8_ = std::any_of(layers_.begin(), layers_.end(), [](const Layer& l) {
    return l.qkv.quantized() || l.o.quantized() || l.gate_up.quantized() || l.down.quantized();
  });
  if (divisors) {
    const Tensor host = to_host_f32(*divisors);
    set_positions(&host);
  } else {
    set_positions(nullptr);
  }
  fold_logit_scale();
}

}  // namespace inflight
