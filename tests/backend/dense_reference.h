// A deliberately plain, dense (unpaged) double-precision forward pass of a Llama-family model
// (and of MPT: LayerNorm, fused q/k/v, clip_qkv, ALiBi, the GELU MLP, biases) over one
// sequence: the oracle that paged schedules are checked against when no framework is at hand.
// Follows the Hugging Face modelling code step by step.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "model/alibi.h"
#include "model/llama.h"

namespace inflight::testing {

using Mat = std::vector<std::vector<double>>;  // [rows][cols]

inline Mat dense_matmul_t(const Mat& x, const Tensor& w, const Tensor* bias) {
  const int64_t n = w.size(0), k = w.size(1);
  Mat y(x.size(), std::vector<double>(static_cast<size_t>(n)));
  for (size_t i = 0; i < x.size(); ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = bias ? bias->data<float>()[j] : 0.0;
      for (int64_t kk = 0; kk < k; ++kk)
        s += x[i][static_cast<size_t>(kk)] * w.data<float>()[j * k + kk];
      y[i][static_cast<size_t>(j)] = s;
    }
  }
  return y;
}

inline Mat dense_rms_norm(const Mat& x, const Tensor& w, double eps) {
  Mat y = x;
  for (auto& row : y) {
    double ss = 0.0;
    for (double v : row) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(row.size()) + eps);
    for (size_t i = 0; i < row.size(); ++i) row[i] *= inv * w.data<float>()[i];
  }
  return y;
}

// LayerNorm (MPT) with an optional bias.
inline Mat dense_layer_norm(const Mat& x, const Tensor& w, const Tensor* b, double eps) {
  Mat y = x;
  for (auto& row : y) {
    double mean = 0.0, var = 0.0;
    for (double v : row) mean += v;
    mean /= static_cast<double>(row.size());
    for (double v : row) var += (v - mean) * (v - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(row.size()) + eps);
    for (size_t i = 0; i < row.size(); ++i) {
      row[i] = (row[i] - mean) * inv * w.data<float>()[i] + (b ? b->data<float>()[i] : 0.0);
    }
  }
  return y;
}

// Logits [tokens][vocab] for positions 0..n-1 of one sequence.
inline Mat dense_forward(const ModelConfig& c, const WeightMap& w,
                         const std::vector<int32_t>& tokens) {
  auto W = [&](const std::string& name) -> const Tensor& { return w.at(name); };
  auto opt = [&](const std::string& name) -> const Tensor* {
    const auto it = w.find(name);
    return it == w.end() ? nullptr : &it->second;
  };
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t hd = c.head_dim, h = c.num_heads, kh = c.num_kv_heads, group = h / kh;
  const std::vector<float> inv_freq = rope_inv_freq(c);
  const bool mpt = c.architecture == "mpt";
  const std::vector<float> slopes = alibi_slopes(h, c.alibi_bias_max);
  auto norm = [&](const Mat& v, const std::string& name) {
    return mpt ? dense_layer_norm(v, W(name + ".weight"), opt(name + ".bias"), c.rms_norm_eps)
               : dense_rms_norm(v, W(name + ".weight"), c.rms_norm_eps);
  };
  Mat x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    const float* e = W("model.embed_tokens.weight").data<float>() +
                     tokens[static_cast<size_t>(t)] * c.hidden_size;
    x[static_cast<size_t>(t)].assign(e, e + c.hidden_size);
  }
  auto rope = [&](std::vector<double>& v, int64_t head, int64_t pos) {
    for (int64_t i = 0; i < hd / 2; ++i) {
      const double a =
          static_cast<double>(static_cast<float>(pos) * inv_freq[static_cast<size_t>(i)]);
      double& x1 = v[static_cast<size_t>(head * hd + i)];
      double& x2 = v[static_cast<size_t>(head * hd + i + hd / 2)];
      const double r1 = x1 * std::cos(a) - x2 * std::sin(a),
                   r2 = x2 * std::cos(a) + x1 * std::sin(a);
      x1 = r1;
      x2 = r2;
    }
  };
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const Mat hn = norm(x, p + "input_layernorm");
    Mat q, k, v;
    if (mpt) {  // the fused [q; k; v], clamped
      const Mat qkv = dense_matmul_t(hn, W(p + "self_attn.qkv_proj.weight"),
                                     opt(p + "self_attn.qkv_proj.bias"));
      for (const auto& row : qkv) {
        std::vector<double> r = row;
        if (c.clip_qkv > 0) {
          for (double& e : r) e = std::min<double>(std::max<double>(e, -c.clip_qkv), c.clip_qkv);
        }
        q.emplace_back(r.begin(), r.begin() + h * hd);
        k.emplace_back(r.begin() + h * hd, r.begin() + (h + kh) * hd);
        v.emplace_back(r.begin() + (h + kh) * hd, r.end());
      }
    } else {
      q = dense_matmul_t(hn, W(p + "self_attn.q_proj.weight"), opt(p + "self_attn.q_proj.bias"));
      k = dense_matmul_t(hn, W(p + "self_attn.k_proj.weight"), opt(p + "self_attn.k_proj.bias"));
      v = dense_matmul_t(hn, W(p + "self_attn.v_proj.weight"), opt(p + "self_attn.v_proj.bias"));
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t hh = 0; hh < h; ++hh) rope(q[static_cast<size_t>(t)], hh, t);
        for (int64_t hh = 0; hh < kh; ++hh) rope(k[static_cast<size_t>(t)], hh, t);
      }
    }
    const double scale =
        c.attention_scale > 0 ? c.attention_scale : 1.0 / std::sqrt(static_cast<double>(hd));
    Mat attn(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(h * hd)));
    for (int64_t t = 0; t < n; ++t) {
      const int64_t lo = c.sliding_window > 0 ? std::max<int64_t>(0, t - c.sliding_window + 1) : 0;
      for (int64_t hh = 0; hh < h; ++hh) {
        const int64_t g = hh / group;
        std::vector<double> s;
        for (int64_t j = lo; j <= t; ++j) {
          double d = 0.0;
          for (int64_t e = 0; e < hd; ++e) {
            d += q[static_cast<size_t>(t)][static_cast<size_t>(hh * hd + e)] *
                 k[static_cast<size_t>(j)][static_cast<size_t>(g * hd + e)];
          }
          const double alibi =
              mpt ? slopes[static_cast<size_t>(hh)] * static_cast<double>(j - t) : 0.0;
          s.push_back(d * scale + alibi);
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0.0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t j = lo; j <= t; ++j) {
          for (int64_t e = 0; e < hd; ++e) {
            attn[static_cast<size_t>(t)][static_cast<size_t>(hh * hd + e)] +=
                s[static_cast<size_t>(j - lo)] / sum *
                v[static_cast<size_t>(j)][static_cast<size_t>(g * hd + e)];
          }
        }
      }
    }
    const Mat o =
        dense_matmul_t(attn, W(p + "self_attn.o_proj.weight"), opt(p + "self_attn.o_proj.bias"));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < c.hidden_size; ++i)
        x[static_cast<size_t>(t)][static_cast<size_t>(i)] +=
            o[static_cast<size_t>(t)][static_cast<size_t>(i)];
    }
    const Mat h2 = norm(x, p + "post_attention_layernorm");
    Mat act = dense_matmul_t(h2, W(p + "mlp.up_proj.weight"), opt(p + "mlp.up_proj.bias"));
    if (mpt) {  // exact GELU
      for (auto& row : act) {
        for (double& e : row) e = 0.5 * e * (1.0 + std::erf(e / std::sqrt(2.0)));
      }
    } else {
      const Mat gate = dense_matmul_t(h2, W(p + "mlp.gate_proj.weight"), nullptr);
      for (size_t t = 0; t < act.size(); ++t) {
        for (size_t i = 0; i < act[t].size(); ++i) {
          act[t][i] *= gate[t][i] / (1.0 + std::exp(-gate[t][i]));
        }
      }
    }
    const Mat down =
        dense_matmul_t(act, W(p + "mlp.down_proj.weight"), opt(p + "mlp.down_proj.bias"));
    for (size_t t = 0; t < x.size(); ++t) {
      for (size_t i = 0; i < x[t].size(); ++i) x[t][i] += down[t][i];
    }
  }
  const Mat fin = norm(x, "model.norm");
  const Tensor* head = opt("lm_head.weight");
  Mat logits = dense_matmul_t(
      fin, head && !c.tie_word_embeddings ? *head : W("model.embed_tokens.weight"), nullptr);
  for (auto& row : logits) {
    for (double& e : row) e *= c.logit_scale;
  }
  return logits;
}

}  // namespace inflight::testing
