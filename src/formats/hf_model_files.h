// HfModelFiles: a ModelFiles over a Hugging Face model directory:
//   config.json                         -> ModelConfig::from_hf_json
//   hf_quant_config.json                (ModelOpt, optional) -> ModelConfig::quantization
//   model.safetensors                   one file, or
//   model.safetensors.index.json        {"weight_map": {tensor: shard file}} + the shards
//   tokenizer.json                      -> tokenizer_path()
//   tokenizer_config.json               "chat_template" (a string, or a list of {name, template}
//                                       of which "default" is taken); else chat_template.jinja
// Tensor names in these checkpoints are already the canonical ones of model_files.h. An FP8
// weight comes out of load_raw with its scale tensors attached (weight_scales.h).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "formats/model_files.h"
#include "formats/safetensors.h"

namespace inflight {

class HfModelFiles : public ModelFiles {
 public:
  // Throws Error(kNotFound / kInvalidFile / kUnsupported) naming the file, key or tensor.
  static std::unique_ptr<HfModelFiles> open(const std::string& dir);

  const ModelConfig& config() const override { return config_; }
  std::vector<std::string> tensor_names() const override { return names_; }
  bool has_tensor(const std::string& name) const override;
  Shape tensor_shape(const std::string& name) const override;
  StoredTensor load_raw(const std::string& name) const override;
  std::string tokenizer_path() const override { return tokenizer_path_; }
  std::string chat_template() const override { return chat_template_; }

 private:
  struct Located {
    const SafetensorsFile* file;
    const SafetensorsTensor* tensor;
    std::shared_ptr<const void> owner;  // the shard: keeps the mapping alive
  };
  HfModelFiles() = default;
  void load_weights(const std::filesystem::path& dir);
  void add_shard(const std::filesystem::path& path);
  // The canonical name of a stored tensor (MPT's are mapped: formats/mpt_config.h).
  std::string canonical_name(const std::string& stored) const;
  const Located& locate(const std::string& name) const;  // throws kNotFound

  std::string dir_;
  ModelConfig config_;
  std::vector<std::shared_ptr<SafetensorsFile>> shards_;
  std::vector<std::string> names_;  // shard order, then file order within a shard
  std::unordered_map<std::string, Located> by_name_;
  std::string tokenizer_path_;
  std::string chat_template_;
};

}  // namespace inflight
