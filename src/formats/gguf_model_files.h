// GgufModelFiles: a ModelFiles over one GGUF file (llama.cpp's converter output).
//
// Tensor names are mapped to the canonical Hugging Face names of model_files.h:
//   token_embd.weight -> model.embed_tokens.weight     output_norm.weight -> model.norm.weight
//   output.weight     -> lm_head.weight
//   blk.{i}.attn_norm -> model.layers.{i}.input_layernorm
//   blk.{i}.attn_{q,k,v} / attn_output -> model.layers.{i}.self_attn.{q,k,v,o}_proj
//   blk.{i}.ffn_norm  -> model.layers.{i}.post_attention_layernorm
//   blk.{i}.ffn_{gate,up,down} -> model.layers.{i}.mlp.{gate,up,down}_proj
// Tensors without a canonical name keep their GGUF name (e.g. rope_freqs.weight, the per-pair
// RoPE frequency divisors that llama.cpp stores for Llama 3.1 instead of rope_scaling keys).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "formats/gguf.h"
#include "formats/model_files.h"

namespace inflight {

class GgufModelFiles : public ModelFiles {
 public:
  // Throws Error(kNotFound / kInvalidFile / kUnsupported) naming the file, key or tensor.
  static std::unique_ptr<GgufModelFiles> open(const std::string& path);
  explicit GgufModelFiles(std::shared_ptr<GgufFile> gguf);

  // The hyper-parameters from `general.architecture` and the `{arch}.*` / `tokenizer.ggml.*`
  // keys (validated). Tied embeddings when output.weight is absent.
  static ModelConfig read_config(const GgufFile& gguf);
  // "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"; unknown names unchanged.
  static std::string canonical_name(std::string_view gguf_name);

  const ModelConfig& config() const override { return config_; }
  std::vector<std::string> tensor_names() const override { return names_; }
  bool has_tensor(const std::string& name) const override;
  Shape tensor_shape(const std::string& name) const override;
  // As stored; q/k projections of llama/mistral carry `interleaved_heads`, so conversion puts
  // them back in rotate-half order.
  StoredTensor load_raw(const std::string& name) const override;
  std::string tokenizer_path() const override { return gguf_->what(); }
  std::string chat_template() const override;

  const GgufFile& gguf() const { return *gguf_; }
  // The GGUF tensor behind a canonical name; throws kNotFound naming both.
  const GgufTensorInfo& tensor_info(const std::string& name) const;

 private:
  // Heads whose rows llama.cpp permuted in tensor `name`, or 0 if it is not permuted.
  int64_t permuted_heads(const std::string& name) const;

  std::shared_ptr<GgufFile> gguf_;
  ModelConfig config_;
  std::vector<std::string> names_;  // canonical, file order
  std::unordered_map<std::string, const GgufTensorInfo*> by_name_;
};

}  // namespace inflight
