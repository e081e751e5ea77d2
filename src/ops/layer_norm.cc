#include "ops/layer_norm.h"

#include "ops/op_checks.h"

namespace inflight {

LayerNormParams make_layer_norm_params(const Tensor* add, const Tensor& residual,
                                       const Tensor& weight, const Tensor* bias, float eps,
                                       const Tensor& out) {
  LayerNormParams p;
  p.norm = make_rms_norm_params(add, residual, weight, eps, out);
  if (bias != nullptr) {
    check_tensor("layer_norm", "bias", *bias, residual.dtype(), residual.device(), {p.norm.dim});
    p.bias = bias->raw();
  }
  return p;
}

}  // namespace inflight
