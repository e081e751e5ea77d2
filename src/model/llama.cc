#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>

namespace inflight {

namespace {

// Rows of host f32 tensors stacked into one [sum of rows, cols] (or [sum] for 1-D) tensor.
Tensor concat_rows(const std::vector<Tensor>& parts) {
  int64_t rows = 0;
  for (const Tensor& t : parts) rows += t.size(0);
  Shape shape = parts.front().shape();
  shape[0] = rows;
  Tensor out = Tensor::empty(shape, DType::kF32);
  char* dst = static_cast<char*>(out.raw());
  for (const Tensor& t : parts) {
    std::memcpy(dst, t.raw(), t.nbytes());
    dst += t.nbytes();
  }
  return out;
}

std::string layer_name(int64_t layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
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

LlamaModel::LlamaModel(const ModelFiles& files, Backend& backend)
    : LlamaModel(
          files.config(),
          [&files](const std::string& name, bool required) {
            if (!required && !files.has_tensor(name)) return Tensor();
            return files.load_f32(name);
          },
          backend) {}

LlamaModel::LlamaModel(const ModelConfig& config, const WeightMap& weights, Backend& backend)
    : LlamaModel(
          config,
          [&weights](const std::string& name, bool required) {
            const auto it = weights.find(name);
            if (it == weights.end()) {
              INFLIGHT_CHECK_CODE(!required, ErrorCode::kNotFound, "weight '{}' is missing", name);
              return Tensor();
            }
            return it->second;
          },
          backend) {}

LlamaModel::LlamaModel(const ModelConfig& config, const WeightSource& source, Backend& backend)
    : config_(config), backend_(backend) {
  check_config();
  load_weights(source);
}

LlamaModel::LlamaModel(const ModelConfig& config, Backend& backend, uint64_t seed)
    : config_(config), backend_(backend) {
  check_config();
  init_random_weights(seed);
}

void LlamaModel::check_config() const {
  // Architecture, positive sizes, GQA divisibility, even head_dim, RoPE scaling parameters.
  config_.validate();
  INFLIGHT_CHECK_CODE(config_.sliding_window <= INT32_MAX && config_.vocab_size <= INT32_MAX,
                      ErrorCode::kUnsupported,
                      "model config: sliding_window {} or vocab_size {} exceeds 2^31 - 1",
                      config_.sliding_window, config_.vocab_size);
}

void LlamaModel::load_weights(const WeightSource& source) {
  const ModelConfig& c = config_;
  const int64_t hidden = c.hidden_size, q_dim = c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim, inter = c.intermediate_size;
  auto load = [&](const std::string& name, const Shape& shape, bool required) {
    Tensor t = source(name, required);
    if (!t.defined()) return t;
    INFLIGHT_CHECK_CODE(t.dtype() == DType::kF32 && t.device() == Device::kCpu,
                        ErrorCode::kInternal, "weight '{}' was not loaded as host f32", name);
    INFLIGHT_CHECK_CODE(t.shape() == shape, ErrorCode::kInvalidFile,
                        "weight '{}' has shape {}, expected {} for this config", name,
                        shape_str(t.shape()), shape_str(shape));
    return t;
  };
  auto upload = [&](const Tensor& host) { return backend_.upload_weight(host); };

  embed_ = upload(load("model.embed_tokens.weight", {c.vocab_size, hidden}, true));
  final_norm_ = upload(load("model.norm.weight", {hidden}, true));
  // Tied: the LM head is the embedding itself, one device copy.
  lm_head_ =
      c.tie_word_embeddings ? embed_ : upload(load("lm_head.weight", {c.vocab_size, hidden}, true));
  std::vector<float> inv_freq = rope_inv_freq(c);
  // Llama 3.1 GGUF files carry their rope scaling as per-pair frequency divisors instead of
  // config keys (model_files.h).
  if (const Tensor divisors = load("rope_freqs.weight", {c.head_dim / 2}, false);
      divisors.defined()) {
    for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] /= divisors.data<float>()[i];
  }
  Tensor inv_freq_host = Tensor::empty({c.head_dim / 2}, DType::kF32);
  std::memcpy(inv_freq_host.raw(), inv_freq.data(), inv_freq.size() * sizeof(float));
  inv_freq_ = backend_.upload(inv_freq_host, DType::kF32);

  // Qwen2 always has q/k/v biases; Llama has them (and, in HF checkpoints, an o_proj bias)
  // when attention_bias.
  const bool qkv_bias = c.attention_bias || c.architecture == "qwen2";
  const bool o_bias = c.attention_bias && c.architecture == "llama";
  layers_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    Layer& layer = layers_[static_cast<size_t>(l)];
    auto name = [l](const char* suffix) { return layer_name(l, suffix); };
    layer.input_norm = upload(load(name("input_layernorm.weight"), {hidden}, true));
    layer.post_norm = upload(load(name("post_attention_layernorm.weight"), {hidden}, true));
    layer.qkv_weight =
        upload(concat_rows({load(name("self_attn.q_proj.weight"), {q_dim, hidden}, true),
                            load(name("self_attn.k_proj.weight"), {kv_dim, hidden}, true),
                            load(name("self_attn.v_proj.weight"), {kv_dim, hidden}, true)}));
    if (qkv_bias) {
      layer.qkv_bias = upload(concat_rows({load(name("self_attn.q_proj.bias"), {q_dim}, true),
                                           load(name("self_attn.k_proj.bias"), {kv_dim}, true),
                                           load(name("self_attn.v_proj.bias"), {kv_dim}, true)}));
    }
    layer.o_weight = upload(load(name("self_attn.o_proj.weight"), {hidden, q_dim}, true));
    if (o_bias) {
      const Tensor b = load(name("self_attn.o_proj.bias"), {hidden}, false);
      if (b.defined()) layer.o_bias = upload(b);
    }
    layer.gate_up_weight =
        upload(concat_rows({load(name("mlp.gate_proj.weight"), {inter, hidden}, true),
                            load(name("mlp.up_proj.weight"), {inter, hidden}, true)}));
    layer.down_weight = upload(load(name("mlp.down_proj.weight"), {hidden, inter}, true));
  }
}

void LlamaModel::init_random_weights(uint64_t seed) {
  const ModelConfig& c = config_;
  const int64_t hidden = c.hidden_size, q_dim = c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim, inter = c.intermediate_size;
  const DType dt = backend_.compute_dtype();
  uint64_t index = 0;
  // Each tensor gets its own stream of the generator: seed and running index mixed.
  auto make = [&](const Shape& shape, float scale, float offset) {
    Tensor t = backend_.alloc(shape, dt);
    backend_.fill_random(t, seed * 0x9e3779b97f4a7c15ULL + ++index, scale, offset);
    return t;
  };
  auto linear = [&](int64_t out, int64_t in) {
    return make({out, in}, 1.0f / std::sqrt(static_cast<float>(in)), 0.0f);
  };
  auto norm = [&]() { return make({hidden}, 0.1f, 1.0f); };

  embed_ = make({c.vocab_size, hidden}, 1.0f, 0.0f);
  final_norm_ = norm();
  lm_head_ = c.tie_word_embeddings ? embed_ : linear(c.vocab_size, hidden);
  const std::vector<float> inv_freq = rope_inv_freq(c);
  Tensor inv_freq_host = Tensor::empty({c.head_dim / 2}, DType::kF32);
  std::memcpy(inv_freq_host.raw(), inv_freq.data(), inv_freq.size() * sizeof(float));
  inv_freq_ = backend_.upload(inv_freq_host, DType::kF32);

  const bool qkv_bias = c.attention_bias || c.architecture == "qwen2";
  layers_.resize(static_cast<size_t>(c.num_layers));
  for (Layer& layer : layers_) {
    layer.input_norm = norm();
    layer.post_norm = norm();
    layer.qkv_weight = linear(q_dim + 2 * kv_dim, hidden);
    if (qkv_bias) layer.qkv_bias = make({q_dim + 2 * kv_dim}, 0.1f, 0.0f);
    layer.o_weight = linear(hidden, q_dim);
    layer.gate_up_weight = linear(2 * inter, hidden);
    layer.down_weight = linear(hidden, inter);
  }
}

int64_t LlamaModel::weight_bytes() const {
  int64_t bytes = embed_.nbytes() + final_norm_.nbytes() + inv_freq_.nbytes();
  if (lm_head_.raw() != embed_.raw()) bytes += lm_head_.nbytes();
  for (const Layer& l : layers_) {
    for (const Tensor* t : {&l.input_norm, &l.qkv_weight, &l.qkv_bias, &l.o_weight, &l.o_bias,
                            &l.post_norm, &l.gate_up_weight, &l.down_weight}) {
      if (t->defined()) bytes += static_cast<int64_t>(t->nbytes());
    }
  }
  return bytes;
}

int64_t LlamaModel::workspace_bytes(int32_t max_tokens, int32_t max_logits) const {
  const ModelConfig& c = config_;
  const int64_t esize = static_cast<int64_t>(dtype_size(backend_.compute_dtype()));
  const int64_t cap =
      (std::max<int64_t>(max_tokens, DecodeGraphs::round_batch(max_logits)) + 63) / 64 * 64;
  const int64_t logits_cap =
      (static_cast<int64_t>(DecodeGraphs::round_batch(max_logits)) + 7) / 8 * 8;
  const int64_t qkv_cols = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  const int64_t per_token =
      3 * c.hidden_size + qkv_cols + 2 * c.num_heads * c.head_dim + 3 * c.intermediate_size;
  return cap * per_token * esize + logits_cap * c.hidden_size * esize +
         logits_cap * c.vocab_size * static_cast<int64_t>(sizeof(float));
}

void LlamaModel::set_graph_mode(GraphMode mode, int32_t max_batch) {
  INFLIGHT_CHECK_CODE(mode != GraphMode::kCapture || backend_.supports_graphs(),
                      ErrorCode::kUnsupported, "the {} backend cannot capture graphs",
                      backend_.name());
  graphs_ = DecodeGraphs(mode, max_batch);
}

void LlamaModel::reserve(int32_t max_tokens, int32_t max_logits) {
  const int32_t decode = DecodeGraphs::round_batch(max_logits);
  ensure_workspace(std::max(max_tokens, decode), decode);
}

KvCache LlamaModel::make_kv_cache(int64_t num_blocks, int32_t block_size) const {
  return KvCache(backend_, config_, num_blocks, block_size);
}

void LlamaModel::check_cache(const KvCache& cache) const {
  INFLIGHT_CHECK_CODE(cache.num_layers() == config_.num_layers &&
                          cache.num_kv_heads() == config_.num_kv_heads &&
                          cache.head_dim() == config_.head_dim,
                      ErrorCode::kInvalidArgument,
                      "kv cache shaped for {} layers x {} kv heads x {} head_dim, model needs {} "
                      "x {} x {}",
                      cache.num_layers(), cache.num_kv_heads(), cache.head_dim(),
                      config_.num_layers, config_.num_kv_heads, config_.head_dim);
  INFLIGHT_CHECK_CODE(
      cache.dtype() == backend_.compute_dtype() && cache.device() == backend_.device(),
      ErrorCode::kInvalidArgument, "kv cache of dtype {} does not belong to the {} backend",
      dtype_name(cache.dtype()), backend_.name());
}

void LlamaModel::ensure_workspace(int64_t num_tokens, int64_t num_logits) {
  const ModelConfig& c = config_;
  const DType dt = backend_.compute_dtype();
  if (num_tokens > ws_.capacity) {
    // Round up so that a growing prompt does not reallocate every step.
    const int64_t cap = (num_tokens + 63) / 64 * 64;
    const int64_t qkv_cols = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
    ws_.residual = backend_.alloc({cap, c.hidden_size}, dt);
    ws_.normed = backend_.alloc({cap, c.hidden_size}, dt);
    ws_.qkv = backend_.alloc({cap, qkv_cols}, dt);
    ws_.q = backend_.alloc({cap, c.num_heads, c.head_dim}, dt);
    ws_.attn = backend_.alloc({cap, c.num_heads, c.head_dim}, dt);
    ws_.sublayer_out = backend_.alloc({cap, c.hidden_size}, dt);
    ws_.gate_up = backend_.alloc({cap, 2 * c.intermediate_size}, dt);
    ws_.act = backend_.alloc({cap, c.intermediate_size}, dt);
    ws_.capacity = cap;
    graphs_.clear();  // they point at the old workspace
  }
  // At least one row, so that a step that samples nothing still has a [0, vocab] view.
  if (std::max<int64_t>(num_logits, 1) > ws_.logits_capacity) {
    const int64_t cap = (std::max<int64_t>(num_logits, 1) + 7) / 8 * 8;
    ws_.picked = backend_.alloc({cap, c.hidden_size}, dt);
    ws_.logits = backend_.alloc({cap, c.vocab_size}, DType::kF32);
    ws_.logits_capacity = cap;
    graphs_.clear();
  }
}

Tensor LlamaModel::enqueue(const ForwardBatch& batch, KvCache& cache) {
  const ModelConfig& c = config_;
  check_cache(cache);
  batch.validate(cache.block_size(), cache.num_blocks());
  for (const int32_t id : batch.token_ids) {
    INFLIGHT_CHECK_CODE(id < c.vocab_size, ErrorCode::kInvalidArgument,
                        "token id {} is outside the vocabulary of {} tokens", id, c.vocab_size);
  }
  if (const auto bucket = graphs_.bucket_for(batch)) return enqueue_decode(batch, cache, *bucket);
  const int64_t t = batch.num_tokens();
  const int64_t num_logits = static_cast<int64_t>(batch.logits_indices.size());
  ensure_workspace(t, num_logits);
  const StepInputs in = backend_.upload_batch(batch);
  run_ops(in, cache, t, num_logits);
  return ws_.logits.rows(0, num_logits);
}

Tensor LlamaModel::enqueue_decode(const ForwardBatch& batch, KvCache& cache,
                                  const DecodeGraphs::Bucket& bucket) {
  DecodeGraphs::pad(batch, bucket, padded_);
  ensure_workspace(bucket.batch, bucket.batch);
  StepInputs in = backend_.upload_batch(padded_);
  // A bound for every batch of the bucket, so that recorded launch sizes stay valid.
  in.max_context_len = bucket.table_width * cache.block_size();
  const void* inputs = in.slot_mapping.raw();  // the base of the packed inputs
  if (graphs_.mode() == GraphMode::kCapture) {
    if (const BackendGraph* graph = graphs_.find(bucket, inputs)) {
      backend_.replay(*graph);
      return ws_.logits.rows(0, batch.num_seqs());
    }
  }
  // First use of the bucket (or no capture): run the ops, which also settles every lazily made
  // resource (GEMM plans), then record them without running them again.
  run_ops(in, cache, bucket.batch, bucket.batch);
  if (graphs_.mode() == GraphMode::kCapture) {
    backend_.begin_capture();
    try {
      run_ops(in, cache, bucket.batch, bucket.batch);
      graphs_.store(bucket, inputs, backend_.end_capture());
    } catch (...) {
      backend_.abort_capture();
      throw;
    }
  }
  return ws_.logits.rows(0, batch.num_seqs());
}

void LlamaModel::run_ops(const StepInputs& in, KvCache& cache, int64_t t, int64_t num_logits) {
  const ModelConfig& c = config_;
  const Tensor residual = ws_.residual.rows(0, t);
  const Tensor normed = ws_.normed.rows(0, t);
  const Tensor qkv = ws_.qkv.rows(0, t);
  const Tensor q = ws_.q.rows(0, t);
  const Tensor attn = ws_.attn.rows(0, t);
  const Tensor attn_2d = attn.reshape({t, c.num_heads * c.head_dim});
  const Tensor sublayer_out = ws_.sublayer_out.rows(0, t);
  const Tensor gate_up = ws_.gate_up.rows(0, t);
  const Tensor act = ws_.act.rows(0, t);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const auto window = static_cast<int32_t>(c.sliding_window);

  backend_.gather_rows(embed_, in.token_ids, residual);
  const bool may_abandon = abandon_ != nullptr && backend_.device() == Device::kCpu;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (may_abandon && abandon_->load(std::memory_order_relaxed)) throw StepAbandoned();
    const Layer& layer = layers_[static_cast<size_t>(l)];
    // Layer 0 normalises the embeddings; later layers first add the previous MLP output.
    backend_.rms_norm(l == 0 ? nullptr : &sublayer_out, residual, layer.input_norm, c.rms_norm_eps,
                      normed);
    backend_.gemm(normed, layer.qkv_weight, layer.qkv_bias.defined() ? &layer.qkv_bias : nullptr,
                  qkv);
    backend_.rope_kv_write(qkv, in, inv_freq_, q, cache.key(l), cache.value(l));
    backend_.paged_attention(q, cache.key(l), cache.value(l), in, scale, window, attn);
    backend_.gemm(attn_2d, layer.o_weight, layer.o_bias.defined() ? &layer.o_bias : nullptr,
                  sublayer_out);
    backend_.rms_norm(&sublayer_out, residual, layer.post_norm, c.rms_norm_eps, normed);
    backend_.gemm(normed, layer.gate_up_weight, nullptr, gate_up);
    backend_.swiglu(gate_up, act);
    backend_.gemm(act, layer.down_weight, nullptr, sublayer_out);
  }
  if (num_logits > 0) {
    backend_.rms_norm(&sublayer_out, residual, final_norm_, c.rms_norm_eps, normed);
    const Tensor picked = ws_.picked.rows(0, num_logits);
    backend_.gather_rows(normed, in.logits_indices, picked);
    backend_.gemm(picked, lm_head_, nullptr, ws_.logits.rows(0, num_logits));  // f32 out
  }
}

Tensor LlamaModel::forward(const ForwardBatch& batch, KvCache& cache) {
  const Tensor logits = enqueue(batch, cache);
  Tensor logits_host = Tensor::empty(logits.shape(), DType::kF32);
  backend_.download_f32(logits, logits_host);
  backend_.synchronize();
  return logits_host;
}

}  // namespace inflight
