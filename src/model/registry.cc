#include "model/registry.h"

#include <algorithm>

#include "core/check.h"
#include "model/llama.h"

namespace inflight {
namespace {

std::unique_ptr<Model> build_llama(const ModelConfig& config, const WeightSource* weights,
                                   Backend& backend, uint64_t seed,
                                   const ModelParallelism& parallel) {
  if (weights != nullptr) return std::make_unique<LlamaModel>(config, *weights, backend, parallel);
  return std::make_unique<LlamaModel>(config, backend, seed, parallel);
}

// LlamaModel is rotary and RMS-normalised; its switches (q/k norms, experts) are each
// family's to set: a config asking for more is another model.
void require_llama_graph(const ModelConfig& c, bool experts, bool qk_norm) {
  INFLIGHT_CHECK_CODE((c.num_experts > 0) == experts && c.qk_norm == qk_norm &&
                          c.positions == ModelConfig::Positions::kRope &&
                          c.norm == ModelConfig::Norm::kRms && c.mlp == ModelConfig::Mlp::kSwiGlu &&
                          !c.mlp_bias && c.clip_qkv == 0.0f && c.attention_scale == 0.0f &&
                          c.logit_scale == 1.0f,
                      ErrorCode::kUnsupported,
                      "model config: {} with {} experts, ALiBi, LayerNorm, a GELU MLP, MLP biases, "
                      "clip_qkv, softmax_scale, logit_scale or q/k norms is not supported by the "
                      "Llama graph",
                      c.architecture, c.num_experts);
}

void require_llama_graph(const ModelConfig& c) {
  require_llama_graph(c, /*experts=*/false, /*qk_norm=*/false);
}

// A mixture of experts needs its experts per token (HF num_experts_per_tok, GGUF
// expert_used_count).
void require_experts(ModelConfig& c) {
  INFLIGHT_CHECK_CODE(c.num_experts > 0 && c.num_experts_per_token > 0, ErrorCode::kInvalidFile,
                      "model config: {} needs num_local_experts (num_experts) and "
                      "num_experts_per_tok, found {} and {}",
                      c.architecture, c.num_experts, c.num_experts_per_token);
}

void configure_llama(ModelConfig& c) {
  c.sliding_window = 0;  // Llama has no window, whatever a config carries
  require_llama_graph(c);
}

void configure_mistral(ModelConfig& c) {
  require_llama_graph(c);
}

void configure_qwen2(ModelConfig& c) {
  require_llama_graph(c);
  c.attention_bias = true;  // Qwen2 always has q/k/v biases; its config has no key for them
  c.o_proj_bias = false;
  // Qwen2 applies its window only to layers >= max_window_layers: not expressible here.
  INFLIGHT_CHECK_CODE(c.sliding_window == 0, ErrorCode::kUnsupported,
                      "model config: use_sliding_window=true is not supported for Qwen2");
}

void configure_qwen3(ModelConfig& c) {
  c.qk_norm = true;  // per-head RMSNorm of q and k before RoPE; its config has no key for it
  require_llama_graph(c, /*experts=*/false, /*qk_norm=*/true);
  // Like Qwen2, a window would apply only to layers >= max_window_layers.
  INFLIGHT_CHECK_CODE(c.sliding_window == 0, ErrorCode::kUnsupported,
                      "model config: use_sliding_window=true is not supported for Qwen3");
}

void configure_mixtral(ModelConfig& c) {
  require_experts(c);
  require_llama_graph(c, /*experts=*/true, /*qk_norm=*/false);
  c.norm_topk_prob = true;  // Mixtral always renormalises the chosen experts' weights
}

void configure_qwen3_moe(ModelConfig& c) {
  c.qk_norm = true;
  require_experts(c);
  require_llama_graph(c, /*experts=*/true, /*qk_norm=*/true);
  INFLIGHT_CHECK_CODE(c.sliding_window == 0, ErrorCode::kUnsupported,
                      "model config: use_sliding_window=true is not supported for Qwen3-MoE");
}

// MPT: LayerNorm, the GELU MLP and ALiBi (formats/mpt_config.h reads them from config.json,
// formats/gguf_model_files.cc from GGUF), multi-head attention, one dense MLP per layer.
void configure_mpt(ModelConfig& c) {
  INFLIGHT_CHECK_CODE(c.norm == ModelConfig::Norm::kLayer &&
                          c.positions == ModelConfig::Positions::kAlibi &&
                          c.mlp == ModelConfig::Mlp::kGelu,
                      ErrorCode::kUnsupported,
                      "model config: MPT needs LayerNorm, ALiBi and the GELU MLP (its config keys "
                      "were not read as MPT's)");
  INFLIGHT_CHECK_CODE(c.num_kv_heads == c.num_heads, ErrorCode::kUnsupported,
                      "model config: MPT with {} kv heads for {} heads (multi-query or "
                      "grouped-query attention) is not supported",
                      c.num_kv_heads, c.num_heads);
  INFLIGHT_CHECK_CODE(c.num_experts == 0 && !c.qk_norm && c.sliding_window == 0,
                      ErrorCode::kUnsupported,
                      "model config: MPT with experts, q/k norms or a sliding window is not "
                      "supported");
}

}  // namespace

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> kArchitectures = {
      {"llama", {"LlamaForCausalLM", "llama"}, {"llama"}, configure_llama, build_llama},
      {"mistral", {"MistralForCausalLM", "mistral"}, {"mistral"}, configure_mistral, build_llama},
      {"qwen2", {"Qwen2ForCausalLM", "qwen2"}, {"qwen2"}, configure_qwen2, build_llama},
      {"qwen3", {"Qwen3ForCausalLM", "qwen3"}, {"qwen3"}, configure_qwen3, build_llama},
      // GGUF: llama.cpp's `llama` with experts (formats/gguf_model_files.cc names it "mixtral").
      {"mixtral", {"MixtralForCausalLM", "mixtral"}, {}, configure_mixtral, build_llama},
      {"qwen3_moe",
       {"Qwen3MoeForCausalLM", "qwen3_moe"},
       {"qwen3moe"},
       configure_qwen3_moe,
       build_llama},
      {"mpt", {"MPTForCausalLM", "MptForCausalLM", "mpt"}, {"mpt"}, configure_mpt, build_llama},
  };
  return kArchitectures;
}

namespace {

const Architecture& find_architecture(std::string_view name) {
  for (const Architecture& a : architectures()) {
    const auto has = [&](const std::vector<std::string_view>& names) {
      return std::find(names.begin(), names.end(), name) != names.end();
    };
    if (a.family == name || has(a.hf_names) || has(a.gguf_names)) return a;
  }
  std::string supported;
  for (const Architecture& a : architectures()) {
    for (const std::string_view n : a.hf_names) {
      supported += fmt::format("{}{}", supported.empty() ? "" : ", ", n);
    }
  }
  INFLIGHT_THROW(ErrorCode::kUnsupported, "architecture '{}' is not supported (supported: {})",
                 name, supported);
}

}  // namespace

ModelConfig resolve_architecture(ModelConfig config) {
  const Architecture& a = find_architecture(config.architecture);
  config.architecture = std::string(a.family);
  a.configure(config);  // idempotent: a resolved config resolves to itself
  config.validate();
  return config;
}

std::unique_ptr<Model> load_model(const ModelFiles& files, Backend& backend) {
  return make_model(files.config(), weights_of(files), backend);
}

std::unique_ptr<Model> make_model(const ModelConfig& config, const WeightSource& weights,
                                  Backend& backend, const ModelParallelism& parallel) {
  const ModelConfig resolved = resolve_architecture(config);
  return find_architecture(resolved.architecture).build(resolved, &weights, backend, 0, parallel);
}

std::unique_ptr<Model> make_dummy_model(const ModelConfig& config, Backend& backend, uint64_t seed,
                                        const ModelParallelism& parallel) {
  const ModelConfig resolved = resolve_architecture(config);
  return find_architecture(resolved.architecture).build(resolved, nullptr, backend, seed, parallel);
}

std::unique_ptr<DeviceRunner> make_runner(std::shared_ptr<Backend> backend,
                                          const ModelConfig& config, const WeightSource* weights,
                                          uint64_t seed, const RunnerOptions& options,
                                          std::shared_ptr<Communicator> tp,
                                          std::shared_ptr<Communicator> pp) {
  INFLIGHT_CHECK_CODE(backend != nullptr, ErrorCode::kInvalidArgument, "no backend given");
  const ModelParallelism parallel{tp.get(), pp.get()};
  std::unique_ptr<Model> model = weights != nullptr
                                     ? make_model(config, *weights, *backend, parallel)
                                     : make_dummy_model(config, *backend, seed, parallel);
  return std::make_unique<DeviceRunner>(std::move(backend), std::move(model), options,
                                        std::move(tp), std::move(pp));
}

}  // namespace inflight
