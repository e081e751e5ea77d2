// LlamaModel's MLP (model/llama.h), one of three by the config, x [T, hidden] -> out [T, hidden]
// (this rank's part; run() sums the ranks'):
//   SwiGLU (Llama, Mistral, Qwen):  out = down(silu(x Wgate^T) * x Wup^T)
//       gate and up fused in one weight [2 I, hidden], projected into gate_up [T, 2 I]
//   GELU (MPT, config.mlp kGelu):   out = down(gelu(x Wup^T))
//       up alone [I, hidden], projected into act [T, I] and activated (Backend::gemm_gelu)
//   experts (Mixtral, Qwen3-MoE, config.num_experts E > 0):
//       ids, w = top-k(softmax(x Wrouter^T))   [T, k]   (ops/moe_route.h), router logits in f32
//       out = sum_j w[:, j] expert_{ids[:, j]}(x)      (ops/moe_experts.h), each a SwiGLU MLP
//       of width I_e over the stacked weights [E, 2 I_e, hidden] and [E, hidden, I_e]
#include <cstdint>

#include "model/llama.h"

namespace inflight {

void LlamaModel::mlp(const Layer& layer, const Tensor& x, bool x_quantized, const Tensor& out) {
  const int64_t t = x.size(0);
  if (gelu_mlp()) {
    const Tensor act = ws_.act.rows(0, t);
    if (layer.gate_up.quantized()) {
      project(x, layer.gate_up, act, x_quantized);  // up
      backend_.gelu(act, act);
    } else {
      backend_.gemm_gelu(x, layer.gate_up, act);  // up, activated as it is stored
    }
    project(act, layer.down, out);
    return;
  }
  if (!has_experts()) {
    const Tensor gate_up = ws_.gate_up.rows(0, t);
    const Tensor act = ws_.act.rows(0, t);
    project(x, layer.gate_up, gate_up, x_quantized);
    if (layer.down.quantized()) {
      backend_.swiglu_quantized(gate_up, act, layer.down, activations_for(act, layer.down));
      project(act, layer.down, out, /*x_quantized=*/true);
    } else {
      backend_.swiglu(gate_up, act);
      project(act, layer.down, out);
    }
    return;
  }
  INFLIGHT_CHECK(!x_quantized, "the experts read their input in bf16");
  const Tensor router_logits = ws_.router_logits.rows(0, t);
  const Tensor ids = ws_.expert_ids.rows(0, t);
  const Tensor weights = ws_.expert_weights.rows(0, t);
  backend_.gemm(x, layer.router, router_logits);  // f32 out: routing is not decided by rounding
  backend_.moe_route(router_logits, static_cast<int32_t>(local_.num_experts_per_token),
                     local_.norm_topk_prob, ids, weights);
  backend_.moe_experts(x, ids, weights, layer.experts_gate_up, layer.experts_down, ws_.moe, out);
}

}  // namespace inflight
