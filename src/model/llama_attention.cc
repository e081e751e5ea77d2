// LlamaModel's positions (model/llama.h): RoPE inverse frequencies (none, linear or llama3
// scaling, or a GGUF file's per-pair divisors), or ALiBi's per-head slopes; and the attention
// block that uses them.
//
// Attention of one layer over a ragged batch of T tokens (H heads of this rank, KH kv heads,
// head_dim D):
//   qkv = x Wqkv^T (+ b)                 [T, (H + 2 KH) D]
//   qkv clamped to [-clip_qkv, clip_qkv]                (MPT, when set)
//   q, k = rms_norm per head                           (Qwen3: config.qk_norm)
//   q = rope(q); cache[slot] = rope(k), v              (ALiBi: inv_freq 0, the identity)
//   a = paged_attention(q, cache)        [T, H, D]    (ALiBi: + slope_h * distance)
//   out = a Wo^T (+ b)                   [T, hidden]  this rank's part; run() sums the ranks'
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <vector>

#include "model/alibi.h"
#include "model/llama.h"

namespace inflight {

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

void LlamaModel::attention(const Layer& layer, int64_t l, const StepInputs& in, KvCache& cache,
                           const Tensor& x, bool x_quantized, const Tensor& out) {
  const ModelConfig& c = local_;  // this rank's heads
  const int64_t t = x.size(0);
  const Tensor qkv = ws_.qkv.rows(0, t);
  const Tensor q = ws_.q.rows(0, t);
  const Tensor attn = ws_.attn.rows(0, t);
  const float scale = c.attention_scale > 0.0f ? c.attention_scale
                                               : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const auto window = static_cast<int32_t>(c.sliding_window);
  const Tensor* alibi = alibi_slopes_.defined() ? &alibi_slopes_ : nullptr;
  project(x, layer.qkv, qkv, x_quantized);
  if (c.clip_qkv > 0.0f) backend_.clamp(qkv, c.clip_qkv);
  if (c.qk_norm) {
    backend_.qk_norm(qkv, c.num_heads, c.num_kv_heads, layer.q_norm, layer.k_norm, c.rms_norm_eps);
  }
  backend_.rope_kv_write(qkv, in, inv_freq_, q, cache.layer(l));  // this stage's cache
  backend_.paged_attention(q, cache.layer(l), in, scale, window, alibi, attn);
  project(attn.reshape({t, c.num_heads * c.head_dim}), layer.o, out);
}

}  // namespace inflight
