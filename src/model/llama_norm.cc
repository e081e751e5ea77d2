// LlamaModel's norms (model/llama.h): RMSNorm (Llama, Mistral, Qwen, Mixtral) or LayerNorm with
// an optional bias (MPT), each fused with the residual add that closes the sublayer before it
// (ops/rms_norm.h, ops/layer_norm.h); and MPT's logit_scale, folded into the final norm.
#include <cstdint>

#include "model/llama.h"

namespace inflight {

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

bool LlamaModel::norm(const Tensor* add, const Tensor& residual, const Tensor& weight,
                      const Tensor& bias, const Tensor& out, const Linear* next) {
  const bool quantize = next != nullptr && next->quantized();
  if (config_.norm == ModelConfig::Norm::kLayer) {
    backend_.layer_norm(add, residual, weight, bias.defined() ? &bias : nullptr,
                        config_.rms_norm_eps, out);
    if (quantize) quantize_for(backend_, out, *next, activations_for(out, *next));
  } else if (quantize) {
    backend_.rms_norm_quantized(add, residual, weight, config_.rms_norm_eps, out, *next,
                                activations_for(out, *next));
  } else {
    backend_.rms_norm(add, residual, weight, config_.rms_norm_eps, out);
  }
  return quantize;
}

}  // namespace inflight
