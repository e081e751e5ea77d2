// MPT (MosaicML MPT-7B / MPT-30B and their instruct and chat variants) as Hugging Face stores
// it: config.json keys of its own (d_model, n_heads, n_layers, expansion_ratio, max_seq_len,
// attn_config, no_bias, logit_scale) and tensors under "transformer.*" names, mapped here to the
// canonical ones (formats/model_files.h):
//   transformer.wte.weight                  -> model.embed_tokens.weight
//   transformer.blocks.{i}.norm_1.*         -> model.layers.{i}.input_layernorm.*
//   transformer.blocks.{i}.attn.Wqkv.*      -> model.layers.{i}.self_attn.qkv_proj.*  [3 d, d]
//   transformer.blocks.{i}.attn.out_proj.*  -> model.layers.{i}.self_attn.o_proj.*
//   transformer.blocks.{i}.norm_2.*         -> model.layers.{i}.post_attention_layernorm.*
//   transformer.blocks.{i}.ffn.up_proj.*    -> model.layers.{i}.mlp.up_proj.*
//   transformer.blocks.{i}.ffn.down_proj.*  -> model.layers.{i}.mlp.down_proj.*
//   transformer.norm_f.*                    -> model.norm.*
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "formats/model_config.h"

namespace inflight {

// Whether config.json describes MPT: model_type "mpt" or architectures[0] MPTForCausalLM.
bool is_mpt_config(const nlohmann::json& j);

// The config of an MPT config.json: LayerNorm, the GELU MLP of expansion_ratio d_model columns,
// ALiBi, tied embeddings; biases everywhere unless no_bias. Throws Error(kUnsupported) naming
// the key and value of a variant the engine does not run (attn_config.attn_type other than
// multihead_attention, prefix_lm, qk_ln, rope, alibi false, another norm_type or ffn_type), and
// Error(kInvalidFile) naming a key of the wrong type.
ModelConfig mpt_config_from_hf_json(const nlohmann::json& j);

// The canonical name of an MPT checkpoint's tensor (the table above); other names unchanged.
std::string mpt_canonical_name(std::string_view name);

}  // namespace inflight
