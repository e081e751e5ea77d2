// ModelFiles: a model on disk, GGUF file or Hugging Face directory, behind one interface.
//
// Tensors are named canonically in Hugging Face style, whatever the file calls them:
//   model.embed_tokens.weight                       [vocab, hidden]
//   model.layers.{i}.input_layernorm.weight         [hidden]
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight  [out, in]   (+ .bias for q/k/v on Qwen2)
//   model.layers.{i}.post_attention_layernorm.weight [hidden]
//   model.layers.{i}.mlp.{gate,up,down}_proj.weight  [out, in]
//   model.norm.weight                               [hidden]
//   lm_head.weight                                  [vocab, hidden] (absent when tied)
// and laid out as Hugging Face lays them out: q/k projections are in rotate-half (NeoX) order
// even where GGUF stores them permuted for interleaved RoPE.
// Other tensors keep the name the file gives them. NOTE: GGUF files of Llama 3.1 carry
// `rope_freqs.weight` [head_dim / 2] (divide RoPE frequency i by element i) instead of
// rope_scaling keys, so their config().rope_scaling is kNone: the graph must apply it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "formats/model_config.h"
#include "formats/stored_tensor.h"

namespace inflight {

class ModelFiles {
 public:
  virtual ~ModelFiles() = default;

  // Opens a .gguf file or a directory with config.json + *.safetensors.
  // Throws Error(kNotFound / kInvalidFile / kUnsupported) that names the file, key or tensor.
  static std::unique_ptr<ModelFiles> open(const std::string& path);

  virtual const ModelConfig& config() const = 0;
  virtual std::vector<std::string> tensor_names() const = 0;
  virtual bool has_tensor(const std::string& name) const = 0;
  virtual Shape tensor_shape(const std::string& name) const = 0;
  // The tensor as stored, a view into the file (formats/stored_tensor.h): no copy, no
  // conversion. Throws Error(kNotFound) naming the tensor, kUnsupported for a stored type no
  // backend can read.
  virtual StoredTensor load_raw(const std::string& name) const = 0;
  // The tensor converted (dequantised) to f32 on the host, in canonical layout.
  Tensor load_f32(const std::string& name) const { return to_host_f32(load_raw(name)); }
  // Where the tokenizer lives: the GGUF file itself, or the directory's tokenizer.json.
  virtual std::string tokenizer_path() const = 0;
  // The chat template shipped with the model, or empty.
  virtual std::string chat_template() const = 0;
};

}  // namespace inflight
