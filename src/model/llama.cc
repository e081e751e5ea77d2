#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numbers>
#include <optional>
#include <string>

#include "core/check.h"
#include "formats/stored_slice.h"
#include "model/alibi.h"
#include "model/linear_loader.h"
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

std::vector<float> rope_inv_freq(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  std::vector<float> inv_freq(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const auto base_pow = static_cast<float>(
        std::pow(static_cast<double>(config.rope_theta), static_cast<double>(exponent)));
    inv_freq[static_cast<size_t>(i)] = 1.0f / base_pow;
  }
  const RopeScaling& rs = config.rope_scaling;
  if (rs.type == RopeScaling::Type::kLinear) {
    for (float& f : inv_freq) f /= rs.factor;
  } else if (rs.type == RopeScaling::Type::kLlama3) {
    // Wavelengths longer than the original context are slowed down by `factor`, shorter than
    // original / high_freq_factor kept, and the band between interpolated smoothly.
    const auto old_len = static_cast<float>(rs.original_max_position_embeddings);
    const float low_freq_wavelen = old_len / rs.low_freq_factor;
    const float high_freq_wavelen = old_len / rs.high_freq_factor;
    const auto two_pi = static_cast<float>(2.0 * std::numbers::pi);
    for (float& f : inv_freq) {
      const float wavelen = two_pi / f;
      const float scaled = wavelen > low_freq_wavelen ? f / rs.factor : f;
      const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
      if (medium) {
        const float smooth =
            (old_len / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
        f = (1.0f - smooth) * scaled / rs.factor + smooth * scaled;
      } else {
        f = scaled;
      }
    }
  }
  return inv_freq;
}

LlamaModel::LlamaModel(const ModelConfig& config, const WeightSource& weights, Backend& backend,
                       const ModelParallelism& parallel)
    : Model(backend), config_(config) {
  init_shard(parallel);
  load_weights(weights);
}

LlamaModel::LlamaModel(const ModelConfig& config, Backend& backend, uint64_t seed,
                       const ModelParallelism& parallel)
    : Model(backend), config_(config) {
  init_shard(parallel);
  init_random_weights(seed);
}

void LlamaModel::init_shard(const ModelParallelism& parallel) {
  check_config();
  const auto many = [](Communicator* c) {
    return c != nullptr && c->world_size() > 1 ? c : nullptr;
  };
  tp_ = many(parallel.tp);
  pp_ = many(parallel.pp);
  shard_ = tp_ != nullptr ? TensorParallelShard::of(config_, tp_->rank(), tp_->world_size())
                          : TensorParallelShard::of(config_, 0, 1);
  stage_ = pp_ != nullptr ? PipelineStage::of(config_, pp_->rank(), pp_->world_size())
                          : PipelineStage::of(config_, 0, 1);
  local_ = shard_.apply(config_);
  local_.num_layers = stage_.num_layers();
}

void LlamaModel::all_reduce(const Tensor& t) {
  if (tp_ != nullptr) tp_->all_reduce(t, ReduceOp::kSum);
}

void LlamaModel::check_config() const {
  // Positive sizes of at most 2^31 - 1 (sliding_window and vocab_size included) whose products
  // fit int64, GQA divisibility, even head_dim, RoPE scaling parameters.
  config_.validate();
  if (has_experts()) {
    INFLIGHT_CHECK_CODE(config_.num_experts_per_token >= 1, ErrorCode::kInvalidFile,
                        "model config: {} experts but num_experts_per_tok is {}",
                        config_.num_experts, config_.num_experts_per_token);
    INFLIGHT_CHECK_CODE(
        config_.num_experts <= kMoeMaxExperts && config_.num_experts_per_token <= kMoeMaxTopK,
        ErrorCode::kUnsupported,
        "model config: {} experts with {} per token (at most {} experts, {} per "
        "token are supported)",
        config_.num_experts, config_.num_experts_per_token, kMoeMaxExperts, kMoeMaxTopK);
  }
}

namespace {

Tensor host_f32(const std::vector<float>& values) {
  Tensor host = Tensor::empty({static_cast<int64_t>(values.size())}, DType::kF32);
  std::memcpy(host.raw(), values.data(), values.size() * sizeof(float));
  return host;
}

}  // namespace

void LlamaModel::set_positions(const Tensor* divisors) {
  if (config_.positions == ModelConfig::Positions::kAlibi) {
    inv_freq_ =
        backend_.upload(host_f32(std::vector<float>(config_.head_dim / 2, 0.0f)), DType::kF32);
    // The slopes of this rank's global heads.
    const std::vector<float> all = alibi_slopes(config_.num_heads, config_.alibi_bias_max);
    const auto first = all.begin() + shard_.heads.begin;
    alibi_slopes_ = backend_.upload(host_f32({first, first + shard_.heads.size}), DType::kF32);
    return;
  }
  std::vector<float> inv_freq = rope_inv_freq(config_);
  if (divisors != nullptr) {
    for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] /= divisors->data<float>()[i];
  }
  inv_freq_ = backend_.upload(host_f32(inv_freq), DType::kF32);
}

void LlamaModel::fold_logit_scale() {
  if (config_.logit_scale == 1.0f || !stage_.last()) return;
  // logits = (s w * x_hat + s b) E^T: exact but for the rounding of s w and s b.
  for (Tensor* t : {&final_norm_, &final_norm_bias_}) {
    if (!t->defined()) continue;
    Tensor host = Tensor::empty(t->shape(), DType::kF32);
    backend_.download_f32(*t, host);
    backend_.synchronize();
    for (int64_t i = 0; i < host.numel(); ++i) host.data<float>()[i] *= config_.logit_scale;
    *t = backend_.upload(host, t->dtype());
  }
}

void LlamaModel::norm(const Tensor* add, const Tensor& residual, const Tensor& weight,
                      const Tensor& bias, const Tensor& out) {
  if (config_.norm == ModelConfig::Norm::kLayer) {
    backend_.layer_norm(add, residual, weight, bias.defined() ? &bias : nullptr,
                        config_.rms_norm_eps, out);
  } else {
    backend_.rms_norm(add, residual, weight, config_.rms_norm_eps, out);
  }
}

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
  // A tensor that is not a linear layer's weight (norms, biases, embedding, router, experts):
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
  // A linear layer's weight (quantized or not: model/linear_loader.h); its bias is planned
  // separately.
  auto linear = [&](std::function<Linear&()> destination, const std::vector<Part>& parts) {
    PlannedLinear w =
        plan_linear(backend_, c.quantization, parts.front().name, std::move(*stack(parts, true)));
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
    add(in_layer(l, [](Layer& x) -> Tensor& { return x.experts_gate_up; }), gate_up, true);
    add(in_layer(l, [](Layer& x) -> Tensor& { return x.experts_down; }), down, true);
  }

  // Pass 2: the device must hold them all; then allocate and load.
  int64_t bytes = 0;
  for (const Planned& p : plan) bytes += p.bytes;
  check_weights_fit(backend_, bytes, "the model's weights");
  layers_.resize(static_cast<size_t>(local_.num_layers));
  // (load_linear leaves a layer's bias alone, whichever is loaded first.)
  for (const Planned& p : plan) p.load();
  if (c.tie_word_embeddings && stage_.last()) lm_head_.weight = embed_;
  if (has_experts()) {
    const int64_t ie = local_.expert_intermediate_size();
    for (Layer& layer : layers_) {
      layer.experts_gate_up = layer.experts_gate_up.reshape({experts, 2 * ie, hidden});
      layer.experts_down = layer.experts_down.reshape({experts, hidden, ie});
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
  // compute dtype first. The dense MLP is a linear layer (FP8 with the rest); experts and router
  // stay unquantized.
  const bool experts = c.num_experts > 0;
  const int64_t mlp_inter = experts ? 0 : c.intermediate_size;
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
    layer += c.num_experts * (hidden + 3 * c.expert_intermediate_size() * hidden) * dt;
  }
  const int64_t embed = c.vocab_size * hidden;
  const int64_t largest = std::max({qkv_rows * hidden, hidden * q_dim, 2 * mlp_inter * hidden});
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
      layer.experts_gate_up = gate_up.reshape({e, 2 * ie, hidden});
      layer.experts_down = down.reshape({e, hidden, ie});
    }
  }
  fp8_ = fp8;
}

int64_t LlamaModel::weight_bytes() const {
  int64_t bytes =
      static_cast<int64_t>(embed_.nbytes() + final_norm_.nbytes() + final_norm_bias_.nbytes() +
                           inv_freq_.nbytes() + alibi_slopes_.nbytes());
  if (lm_head_.weight.raw() != embed_.raw()) bytes += lm_head_.nbytes();
  for (const Layer& l : layers_) {
    bytes += static_cast<int64_t>(l.input_norm.nbytes() + l.post_norm.nbytes() +
                                  l.input_norm_bias.nbytes() + l.post_norm_bias.nbytes());
    bytes += l.qkv.nbytes() + l.o.nbytes() + l.gate_up.nbytes() + l.down.nbytes();
    bytes += static_cast<int64_t>(l.q_norm.nbytes() + l.k_norm.nbytes());
    bytes += l.router.nbytes() +
             static_cast<int64_t>(l.experts_gate_up.nbytes() + l.experts_down.nbytes());
  }
  return bytes;
}

std::vector<LlamaModel::Buffer> LlamaModel::token_buffers(int64_t cap) const {
  const ModelConfig& c = local_;  // this rank's shard
  const DType dt = backend_.compute_dtype();
  const int64_t qkv_cols = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  // The dense MLP's buffers, or the router's (the experts' scratch: moe_buffers).
  const int64_t dense = has_experts() ? 1 : cap, moe = has_experts() ? cap : 1;
  // The GELU MLP projects into `act` and activates it in place.
  const int64_t gate_up_rows = gelu_mlp() ? 1 : dense;
  const int64_t k = std::max<int64_t>(c.num_experts_per_token, 1);
  return {{&Workspace::residual, {cap, c.hidden_size}, dt},
          {&Workspace::normed, {cap, c.hidden_size}, dt},
          {&Workspace::qkv, {cap, qkv_cols}, dt},
          {&Workspace::q, {cap, c.num_heads, c.head_dim}, dt},
          {&Workspace::attn, {cap, c.num_heads, c.head_dim}, dt},
          {&Workspace::sublayer_out, {cap, c.hidden_size}, dt},
          {&Workspace::gate_up, {gate_up_rows, 2 * c.intermediate_size}, dt},
          {&Workspace::act, {dense, c.intermediate_size}, dt},
          {&Workspace::router_logits, {moe, std::max<int64_t>(c.num_experts, 1)}, DType::kF32},
          {&Workspace::expert_ids, {moe, k}, DType::kI32},
          {&Workspace::expert_weights, {moe, k}, DType::kF32},
          // FP8 layers' inputs, quantized (runtime/linear.h): any layer's [t, K] fits.
          {&Workspace::xq, {fp8_ ? cap * max_in_features() : 1}, DType::kF8E4M3},
          {&Workspace::xq_scales, {fp8_ ? cap * max_scale_groups() : 1}, DType::kF32}};
}

std::vector<MoeWorkspaceBuffer> LlamaModel::moe_buffers(int64_t cap) const {
  const ModelConfig& c = local_;  // this rank's shard
  if (!has_experts()) return {};
  return moe_workspace_buffers(cap, c.num_experts_per_token, c.num_experts, c.hidden_size,
                               c.expert_intermediate_size(), backend_.compute_dtype());
}

int64_t LlamaModel::max_in_features() const {
  const ModelConfig& c = local_;  // this rank's shard
  return std::max({c.hidden_size, c.num_heads * c.head_dim, c.intermediate_size});
}

int64_t LlamaModel::max_scale_groups() const {
  int64_t groups = 1;
  for (const Layer& l : layers_) {
    for (const Linear* w : {&l.qkv, &l.o, &l.gate_up, &l.down}) {
      if (w->block_cols > 0) {
        groups = std::max(groups, (w->in_features() + w->block_cols - 1) / w->block_cols);
      }
    }
  }
  return groups;
}

void LlamaModel::project(const Tensor& x, const Linear& w, const Tensor& y) {
  if (!w.quantized()) {
    backend_.gemm(x, w, y);
    return;
  }
  const int64_t t = x.size(0), k = x.size(1);
  const int64_t groups = w.block_cols > 0 ? (k + w.block_cols - 1) / w.block_cols : 1;
  const Tensor scales = ws_.xq_scales.rows(0, groups * t);
  const QuantizedActivations q{ws_.xq.rows(0, t * k).reshape({t, k}),
                               w.block_cols > 0 ? scales.reshape({groups, t}) : scales};
  quantize_for(backend_, x, w, q);
  backend_.gemm(q, w, y);
}

std::vector<LlamaModel::Buffer> LlamaModel::logits_buffers(int64_t cap) const {
  // A stage before the last returns a placeholder [rows, 1] (Model::last_stage).
  return {{&Workspace::picked, {cap, local_.hidden_size}, backend_.compute_dtype()},
          {&Workspace::logits, {cap, stage_.last() ? local_.vocab_size : 1}, DType::kF32}};
}

namespace {

// Capacities are rounded up so that a growing prompt does not reallocate every step; at least
// one logits row, so that a step that samples nothing still has a [0, vocab] view.
int64_t token_capacity(int64_t tokens) {
  return (std::max<int64_t>(tokens, 1) + 63) / 64 * 64;
}
int64_t logits_capacity(int64_t logits) {
  return (std::max<int64_t>(logits, 1) + 7) / 8 * 8;
}

}  // namespace

int64_t LlamaModel::workspace_bytes(int64_t tokens, int64_t logits) const {
  int64_t bytes = 0;
  const auto add = [&bytes](const Shape& shape, DType dtype) {
    int64_t n = static_cast<int64_t>(dtype_size(dtype));
    for (const int64_t d : shape) n *= d;
    bytes += n;
  };
  for (const auto& list :
       {token_buffers(token_capacity(tokens)), logits_buffers(logits_capacity(logits))}) {
    for (const Buffer& b : list) add(b.shape, b.dtype);
  }
  for (const MoeWorkspaceBuffer& b : moe_buffers(token_capacity(tokens))) add(b.shape, b.dtype);
  return bytes;
}

bool LlamaModel::reserve(int64_t tokens, int64_t logits) {
  bool grew = false;
  if (tokens > ws_.capacity) {
    ws_.capacity = token_capacity(tokens);
    for (const Buffer& b : token_buffers(ws_.capacity))
      ws_.*b.member = backend_.alloc(b.shape, b.dtype);
    for (const MoeWorkspaceBuffer& b : moe_buffers(ws_.capacity))
      ws_.moe.*b.member = backend_.alloc(b.shape, b.dtype);
    grew = true;
  }
  if (std::max<int64_t>(logits, 1) > ws_.logits_capacity) {
    ws_.logits_capacity = logits_capacity(logits);
    for (const Buffer& b : logits_buffers(ws_.logits_capacity)) {
      ws_.*b.member = backend_.alloc(b.shape, b.dtype);
    }
    grew = true;
  }
  return grew;
}

Tensor LlamaModel::run(const StepInputs& in, KvCache& cache, const std::atomic<bool>* abandon) {
  const ModelConfig& c = local_;  // this rank's heads, MLP width and vocabulary columns
  const int64_t t = in.num_tokens, num_logits = in.num_logits;
  INFLIGHT_CHECK(t <= ws_.capacity && num_logits <= ws_.logits_capacity,
                 "step of {} tokens / {} logits rows exceeds the reserved workspace ({} / {})", t,
                 num_logits, ws_.capacity, ws_.logits_capacity);
  const Tensor residual = ws_.residual.rows(0, t);
  const Tensor normed = ws_.normed.rows(0, t);
  const Tensor qkv = ws_.qkv.rows(0, t);
  const Tensor q = ws_.q.rows(0, t);
  const Tensor attn = ws_.attn.rows(0, t);
  const Tensor attn_2d = attn.reshape({t, c.num_heads * c.head_dim});
  const Tensor sublayer_out = ws_.sublayer_out.rows(0, t);
  const float scale = c.attention_scale > 0.0f ? c.attention_scale
                                               : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const auto window = static_cast<int32_t>(c.sliding_window);
  const Tensor* alibi = alibi_slopes_.defined() ? &alibi_slopes_ : nullptr;

  if (stage_.first()) {
    backend_.gather_rows(embed_, in.token_ids, residual, shard_.vocab.begin);
    if (shard_.vocab_parallel()) all_reduce(residual);  // each rank looked up its ids only
  } else {  // the residual stream of the stage before: residual and the last MLP's output
    pp_->recv(residual, stage_.stage - 1);
    pp_->recv(sublayer_out, stage_.stage - 1);
  }
  const bool may_abandon = abandon != nullptr && !backend_.asynchronous();
  for (int64_t l = 0; l < c.num_layers; ++l) {  // this stage's layers, from layer_begin
    if (may_abandon && abandon->load(std::memory_order_relaxed)) throw StepAbandoned();
    const Layer& layer = layers_[static_cast<size_t>(l)];
    // Layer 0 normalises the embeddings; later layers first add the previous MLP output.
    const bool model_first = stage_.layer_begin + l == 0;
    norm(model_first ? nullptr : &sublayer_out, residual, layer.input_norm, layer.input_norm_bias,
         normed);
    project(normed, layer.qkv, qkv);
    if (c.clip_qkv > 0.0f) backend_.clamp(qkv, c.clip_qkv);
    if (c.qk_norm) {
      backend_.qk_norm(qkv, c.num_heads, c.num_kv_heads, layer.q_norm, layer.k_norm,
                       c.rms_norm_eps);
    }
    backend_.rope_kv_write(qkv, in, inv_freq_, q, cache.layer(l));  // this stage's cache
    backend_.paged_attention(q, cache.layer(l), in, scale, window, alibi, attn);
    project(attn_2d, layer.o, sublayer_out);
    all_reduce(sublayer_out);
    norm(&sublayer_out, residual, layer.post_norm, layer.post_norm_bias, normed);
    mlp(layer, normed, sublayer_out);
    all_reduce(sublayer_out);
  }
  const Tensor logits = ws_.logits.rows(0, num_logits);
  if (!stage_.last()) {  // on to the next stage
    pp_->send(residual, stage_.stage + 1);
    pp_->send(sublayer_out, stage_.stage + 1);
    return logits;
  }
  if (num_logits > 0) {
    norm(&sublayer_out, residual, final_norm_, final_norm_bias_, normed);
    const Tensor picked = ws_.picked.rows(0, num_logits);
    backend_.gather_rows(normed, in.logits_indices, picked);
    backend_.gemm(picked, lm_head_, logits);  // f32 out
  }
  return logits;
}

void LlamaModel::mlp(const Layer& layer, const Tensor& x, const Tensor& out) {
  const int64_t t = x.size(0);
  if (gelu_mlp()) {
    const Tensor act = ws_.act.rows(0, t);
    project(x, layer.gate_up, act);  // up
    backend_.gelu(act, act);
    project(act, layer.down, out);
    return;
  }
  if (!has_experts()) {
    const Tensor gate_up = ws_.gate_up.rows(0, t);
    const Tensor act = ws_.act.rows(0, t);
    project(x, layer.gate_up, gate_up);
    backend_.swiglu(gate_up, act);
    project(act, layer.down, out);
    return;
  }
  const Tensor router_logits = ws_.router_logits.rows(0, t);
  const Tensor ids = ws_.expert_ids.rows(0, t);
  const Tensor weights = ws_.expert_weights.rows(0, t);
  backend_.gemm(x, layer.router, router_logits);  // f32 out: routing is not decided by rounding
  backend_.moe_route(router_logits, static_cast<int32_t>(local_.num_experts_per_token),
                     local_.norm_topk_prob, ids, weights);
  backend_.moe_experts(x, ids, weights, layer.experts_gate_up, layer.experts_down, ws_.moe, out);
}

}  // namespace inflight
