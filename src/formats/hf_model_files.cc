#include "formats/hf_model_files.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "formats/mpt_config.h"
#include "formats/weight_scales.h"

namespace inflight {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  INFLIGHT_CHECK_CODE(in.good(), ErrorCode::kNotFound, "cannot read '{}'", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json read_json(const fs::path& path) {
  try {
    return json::parse(read_text(path));
  } catch (const json::exception& e) {
    INFLIGHT_THROW(ErrorCode::kInvalidFile, "{}: not valid JSON: {}", path.string(), e.what());
  }
}

// tokenizer_config.json "chat_template": a string, or [{"name": ..., "template": ...}, ...].
std::string template_from_tokenizer_config(const json& cfg, const fs::path& path) {
  if (!cfg.is_object() || !cfg.contains("chat_template") || cfg["chat_template"].is_null()) {
    return {};
  }
  const json& t = cfg["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  INFLIGHT_CHECK_CODE(t.is_array(), ErrorCode::kInvalidFile,
                      "{}: chat_template must be a string or a list of {{name, template}}",
                      path.string());
  for (const json& entry : t) {
    if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
        entry["template"].is_string()) {
      return entry["template"].get<std::string>();
    }
  }
  INFLIGHT_THROW(ErrorCode::kInvalidFile,
                 "{}: chat_template is a list without a template named 'default'", path.string());
}

}  // namespace

std::unique_ptr<HfModelFiles> HfModelFiles::open(const std::string& dir_str) {
  const fs::path dir(dir_str);
  INFLIGHT_CHECK_CODE(fs::is_directory(dir), ErrorCode::kNotFound, "'{}' is not a directory",
                      dir_str);
  std::unique_ptr<HfModelFiles> m(new HfModelFiles());
  m->dir_ = dir_str;
  const fs::path config_path = dir / "config.json";
  INFLIGHT_CHECK_CODE(fs::exists(config_path), ErrorCode::kNotFound,
                      "'{}' has no config.json: not a Hugging Face model directory", dir_str);
  try {
    const json config = read_json(config_path);
    m->config_ = ModelConfig::from_hf_json(config);
    // ModelOpt states its quantization here; it counts where config.json has none.
    const fs::path quant_path = dir / "hf_quant_config.json";
    if (fs::exists(quant_path)) {
      const json quant = read_json(quant_path);
      m->config_.quantization = Quantization::from_hf(config, &quant);
    }
  } catch (const Error& e) {
    INFLIGHT_THROW(e.code(), "{}: {}", dir_str, e.message());
  }
  m->load_weights(dir);

  if (fs::exists(dir / "tokenizer.json")) m->tokenizer_path_ = (dir / "tokenizer.json").string();
  const fs::path tok_config = dir / "tokenizer_config.json";
  if (fs::exists(tok_config)) {
    m->chat_template_ = template_from_tokenizer_config(read_json(tok_config), tok_config);
  }
  if (m->chat_template_.empty() && fs::exists(dir / "chat_template.jinja")) {
    m->chat_template_ = read_text(dir / "chat_template.jinja");
  }
  return m;
}

void HfModelFiles::add_shard(const fs::path& path) {
  auto shard = SafetensorsFile::open(path.string());
  for (const SafetensorsTensor& t : shard->tensors()) {
    std::string name = canonical_name(t.name);
    const bool inserted = by_name_.emplace(name, Located{shard.get(), &t, shard}).second;
    INFLIGHT_CHECK_CODE(inserted, ErrorCode::kInvalidFile,
                        "{}: tensor '{}' (as '{}') is also in another shard", path.string(), t.name,
                        name);
    names_.push_back(std::move(name));
  }
  shards_.push_back(std::move(shard));
}

void HfModelFiles::load_weights(const fs::path& dir) {
  const fs::path single = dir / "model.safetensors";
  const fs::path index_path = dir / "model.safetensors.index.json";
  if (!fs::exists(index_path)) {
    INFLIGHT_CHECK_CODE(fs::exists(single), ErrorCode::kNotFound,
                        "'{}' has neither model.safetensors nor model.safetensors.index.json",
                        dir.string());
    add_shard(single);
    return;
  }
  const json index = read_json(index_path);
  INFLIGHT_CHECK_CODE(
      index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
      ErrorCode::kInvalidFile, "{}: needs a 'weight_map' object", index_path.string());
  const json& map = index["weight_map"];
  std::vector<std::string> files;  // first-appearance order
  for (const auto& [tensor, file] : map.items()) {
    INFLIGHT_CHECK_CODE(file.is_string(), ErrorCode::kInvalidFile,
                        "{}: weight_map['{}'] must be a file name", index_path.string(), tensor);
    const std::string name = file.get<std::string>();
    // NOTE: shards must sit in the directory itself; this also keeps a hostile index from
    // pointing at arbitrary paths.
    INFLIGHT_CHECK_CODE(
        !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
        ErrorCode::kInvalidFile, "{}: weight_map['{}'] = '{}' is not a file name in the directory",
        index_path.string(), tensor, name);
    if (std::find(files.begin(), files.end(), name) == files.end()) files.push_back(name);
  }
  std::sort(files.begin(), files.end());  // model-00001-of-0000N first
  for (const std::string& f : files) add_shard(dir / f);
  for (const auto& [tensor, file] : map.items()) {
    const auto it = by_name_.find(canonical_name(tensor));
    INFLIGHT_CHECK_CODE(it != by_name_.end() &&
                            fs::path(it->second.file->what()).filename() == file.get<std::string>(),
                        ErrorCode::kInvalidFile, "{}: tensor '{}' is not in shard '{}'",
                        index_path.string(), tensor, file.get<std::string>());
  }
}

std::string HfModelFiles::canonical_name(const std::string& stored) const {
  return config_.architecture == "mpt" ? mpt_canonical_name(stored) : stored;
}

bool HfModelFiles::has_tensor(const std::string& name) const {
  return by_name_.count(name);
}

const HfModelFiles::Located& HfModelFiles::locate(const std::string& name) const {
  const auto it = by_name_.find(name);
  INFLIGHT_CHECK_CODE(it != by_name_.end(), ErrorCode::kNotFound, "{}: no tensor '{}'", dir_, name);
  return it->second;
}

Shape HfModelFiles::tensor_shape(const std::string& name) const {
  return locate(name).tensor->shape;
}

StoredTensor HfModelFiles::load_raw(const std::string& name) const {
  const Located& l = locate(name);
  StoredTensor t = l.file->load_raw(*l.tensor, l.owner);
  // FP8 weights come with their scales (weight_scales.h).
  attach_weight_scales(
      t, config_.quantization,
      [this](const std::string& scale_name) -> std::optional<StoredTensor> {
        const auto it = by_name_.find(scale_name);
        if (it == by_name_.end()) return std::nullopt;
        return it->second.file->load_raw(*it->second.tensor, it->second.owner);
      },
      dir_);
  return t;
}

}  // namespace inflight
