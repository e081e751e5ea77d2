#include "frontend/model_repository.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/logging.h"
#include "frontend/api_error.h"
#include "frontend/json_fields.h"

namespace inflight::frontend {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

constexpr int32_t kMaxInt = std::numeric_limits<int32_t>::max();

// The keys inflight.json may hold, each read below.
constexpr std::string_view kKeys[] = {"served_model_name",
                                      "aliases",
                                      "model",
                                      "tokenizer",
                                      "chat_template",
                                      "device",
                                      "dtype",
                                      "quantization",
                                      "kv_cache_dtype",
                                      "kv_cache_memory",
                                      "gpu_memory_utilization",
                                      "max_model_len",
                                      "max_num_seqs",
                                      "max_num_batched_tokens",
                                      "block_size",
                                      "max_logprobs",
                                      "enable_prefix_caching"};

// `path` relative to `dir` unless absolute; empty stays empty.
std::string under(const fs::path& dir, const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return (dir / path).string();
}

// Reads every known key of `j` into `spec`; FieldReader's ApiError names the key.
void read_fields(const json& j, ModelSpec& spec) {
  for (const auto& [key, value] : j.items()) {
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      throw_bad_request(fmt::format("unknown key '{}' (known: {})", key, fmt::join(kKeys, ", ")),
                        key);
    }
  }
  const FieldReader r(j);
  auto str = [&](const char* key, std::string& out) {
    if (auto v = r.string(key)) {
      if (v->empty()) throw_bad_request(fmt::format("'{}' must not be empty", key), key);
      out = *v;
    }
  };
  auto int32 = [&](const char* key, int64_t lo, int32_t& out) {
    if (auto v = r.integer(key, lo, kMaxInt)) out = static_cast<int32_t>(*v);
  };
  str("served_model_name", spec.name);
  str("model", spec.model);
  str("tokenizer", spec.tokenizer);
  str("chat_template", spec.chat_template);
  str("device", spec.device);
  str("dtype", spec.dtype);
  str("quantization", spec.quantization);
  str("kv_cache_dtype", spec.kv_cache_dtype);
  str("kv_cache_memory", spec.kv_cache_memory);
  if (const json* aliases = r.get("aliases")) {
    if (!aliases->is_array()) throw_bad_request("'aliases' must be a list of names", "aliases");
    spec.aliases.clear();
    for (const json& a : *aliases) {
      if (!a.is_string() || a.get<std::string>().empty()) {
        throw_bad_request("'aliases' must hold non-empty strings", "aliases");
      }
      spec.aliases.push_back(a.get<std::string>());
    }
  }
  if (auto v = r.positive_number("gpu_memory_utilization", 0, 1)) spec.gpu_memory_utilization = *v;
  int32("max_model_len", 0, spec.max_model_len);
  int32("max_num_seqs", 0, spec.max_num_seqs);
  int32("max_num_batched_tokens", 0, spec.max_num_batched_tokens);
  int32("block_size", 1, spec.block_size);
  int32("max_logprobs", 0, spec.max_logprobs);
  if (auto v = r.boolean("enable_prefix_caching")) spec.enable_prefix_caching = *v;
  EngineConfig probe;
  if (const Status s = parse_kv_cache_memory(spec.kv_cache_memory, probe); !s.ok()) {
    throw_bad_request(fmt::format("'kv_cache_memory': {}", s.message()), "kv_cache_memory");
  }
}

// Every file under `dir` (links followed) as "path size mtime" lines, sorted; empty when `dir`
// cannot be read.
std::string files_fingerprint(const fs::path& dir) {
  std::vector<std::string> lines;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink,
                                           ec),
       end;
       !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;  // follows links
    const auto size = fs::file_size(it->path(), file_ec);
    const auto mtime = fs::last_write_time(it->path(), file_ec);
    if (file_ec) continue;
    lines.push_back(fmt::format("{} {} {}", fs::relative(it->path(), dir).string(), size,
                                mtime.time_since_epoch().count()));
  }
  std::sort(lines.begin(), lines.end());
  return fmt::format("{}", fmt::join(lines, "\n"));
}

// The model file of a directory without "model": its one .gguf, else the directory itself
// (a Hugging Face checkpoint).
std::string find_model(const fs::path& dir) {
  std::vector<fs::path> ggufs;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".gguf") ggufs.push_back(e.path());
  }
  INFLIGHT_CHECK_CODE(ggufs.size() <= 1, ErrorCode::kInvalidArgument,
                      "{}: {} .gguf files; name the model's in {} (\"model\": \"FILE\")",
                      dir.string(), ggufs.size(), kModelConfigFile);
  return ggufs.empty() ? dir.string() : ggufs[0].string();
}

}  // namespace

std::vector<std::string> list_model_directories(const fs::path& repository) {
  INFLIGHT_CHECK_CODE(fs::is_directory(repository), ErrorCode::kNotFound,
                      "--model-repository {}: not a directory", repository.string());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(repository)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && !name.starts_with(".")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

ModelSpec parse_model_spec(std::string_view json_text, const std::string& source,
                           const ModelSpec& defaults) {
  ModelSpec spec = defaults;
  try {
    read_fields(parse_json_object(json_text), spec);
  } catch (const ApiError& e) {
    INFLIGHT_THROW(ErrorCode::kInvalidArgument, "{}: {}", source, e.what());
  }
  return spec;
}

ModelSpec read_model_spec(const fs::path& dir, const ModelSpec& defaults) {
  ModelSpec base = defaults;
  base.name = dir.filename().string();
  base.aliases.clear();
  base.model.clear();
  const fs::path file = dir / kModelConfigFile;
  ModelSpec spec = base;
  if (fs::exists(file)) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    spec = parse_model_spec(text.str(), file.string(), base);
  }
  spec.model = spec.model.empty() ? find_model(dir) : under(dir, spec.model);
  spec.tokenizer = under(dir, spec.tokenizer);
  // A template given as text stays text; a relative file name is the directory's.
  if (!spec.chat_template.empty() && fs::exists(dir / spec.chat_template)) {
    spec.chat_template = under(dir, spec.chat_template);
  }
  return spec;
}

std::string gpu_key(const std::string& device) {
  if (device == "cpu") return {};
  if (device == "auto" || device == "cuda") return "cuda:0";
  return device;
}

void plan_memory_shares(std::vector<ModelSpec>& specs, double budget) {
  std::map<std::string, std::vector<ModelSpec*>> by_gpu;
  for (ModelSpec& s : specs) {
    if (const std::string key = gpu_key(s.device); !key.empty()) by_gpu[key].push_back(&s);
  }
  for (const auto& [gpu, models] : by_gpu) {
    double named = 0;
    std::vector<std::string> named_list;
    std::vector<ModelSpec*> rest;
    for (ModelSpec* s : models) {
      if (s->gpu_memory_utilization > 0) {
        named += s->gpu_memory_utilization;
        named_list.push_back(fmt::format("{} {}", s->name, s->gpu_memory_utilization));
      } else {
        rest.push_back(s);
      }
    }
    // A little slack for the sum of decimal fractions (0.1 + 0.2 > 0.3).
    constexpr double kSlack = 1e-9;
    INFLIGHT_CHECK_CODE(named <= budget + kSlack, ErrorCode::kInvalidArgument,
                        "the models on {} ask for {:.3g} of its memory ({}), more than the "
                        "budget {:.3g} (--gpu-memory-utilization): lower their "
                        "gpu_memory_utilization or place one on another device",
                        gpu, named, fmt::join(named_list, ", "), budget);
    if (rest.empty()) continue;
    const double part = (budget - named) / static_cast<double>(rest.size());
    std::vector<std::string> rest_names;
    for (ModelSpec* s : rest) rest_names.push_back(s->name);
    INFLIGHT_CHECK_CODE(part > kSlack, ErrorCode::kInvalidArgument,
                        "the models on {} that name gpu_memory_utilization ({}) leave nothing "
                        "of the budget {:.3g} for {}: give those a share",
                        gpu, fmt::join(named_list, ", "), budget, fmt::join(rest_names, ", "));
    for (ModelSpec* s : rest) s->gpu_memory_utilization = part;
  }
}

ModelRepository::ModelRepository(fs::path root, ModelSpec defaults, double budget)
    : root_(std::move(root)), defaults_(std::move(defaults)), budget_(budget) {
  std::lock_guard lock(mutex_);
  initial_ = scan_locked(/*at_start=*/true);
  INFLIGHT_CHECK_CODE(!initial_.empty(), ErrorCode::kNotFound,
                      "--model-repository {}: no model directory in it", root_.string());
  std::vector<ModelSpec> specs;
  for (const auto& [name, spec] : planned_) specs.push_back(spec);
  plan_memory_shares(specs, budget_);  // refuses at start what cannot fit
  for (const auto& spec : specs) planned_[spec.name] = spec;
}

std::vector<RepositoryModel> ModelRepository::scan() {
  std::lock_guard lock(mutex_);
  return scan_locked(/*at_start=*/false);
}

std::vector<RepositoryModel> ModelRepository::scan_locked(bool at_start) {
  std::vector<RepositoryModel> out;
  std::map<std::string, fs::path> dirs;
  for (const std::string& dir : list_model_directories(root_)) {
    RepositoryModel m{dir, {}, root_ / dir, {}};
    try {
      const ModelSpec spec = read_model_spec(m.dir, defaults_);
      m.name = spec.name;
      m.aliases = spec.aliases;
      // A new model's share is planned when it loads; a known one keeps its plan.
      if (at_start) planned_[spec.name] = spec;
    } catch (const Error& e) {
      m.error = e.message();
    }
    if (const auto taken = dirs.find(m.name); taken != dirs.end()) {
      INFLIGHT_CHECK_CODE(!at_start, ErrorCode::kInvalidArgument,
                          "{} and {} both serve the name '{}': give one another "
                          "served_model_name",
                          taken->second.string(), m.dir.string(), m.name);
      if (shadowed_.insert(m.dir.string()).second) {  // once, not at every scan
        INFLIGHT_LOG_WARN("{} is not served: {} serves the name '{}' already", m.dir.string(),
                          taken->second.string(), m.name);
      }
      continue;
    }
    dirs[m.name] = m.dir;
    out.push_back(std::move(m));
  }
  dirs_ = std::move(dirs);
  return out;
}

ModelSpec ModelRepository::spec_to_load(const std::string& name) {
  std::lock_guard lock(mutex_);
  const auto dir = dirs_.find(name);
  INFLIGHT_CHECK_CODE(dir != dirs_.end() && fs::is_directory(dir->second), ErrorCode::kNotFound,
                      "no model '{}' in {} (its directory is gone, or serves another name now)",
                      name, root_.string());
  ModelSpec spec = read_model_spec(dir->second, defaults_);
  reading_files_[name] = files_fingerprint(dir->second);  // what this load reads
  INFLIGHT_CHECK_CODE(spec.name == name, ErrorCode::kInvalidArgument,
                      "{}: served_model_name is now '{}', was '{}' when the repository was read: "
                      "unload it, then load '{}'",
                      dir->second.string(), spec.name, name, spec.name);
  // A file that names no share keeps the one planned before; the others keep theirs.
  const auto known = planned_.find(name);
  if (spec.gpu_memory_utilization == 0 && known != planned_.end()) {
    spec.gpu_memory_utilization = known->second.gpu_memory_utilization;
  }
  std::vector<ModelSpec> specs;
  for (const auto& [other, planned] : planned_) {
    if (other != name) specs.push_back(planned);
  }
  specs.push_back(spec);
  plan_memory_shares(specs, budget_);
  planned_[name] = specs.back();  // only a spec that fits replaces the one before
  return specs.back();
}

void ModelRepository::loaded(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (const auto read = reading_files_.find(name); read != reading_files_.end()) {
    loaded_files_[name] = read->second;
  }
}

bool ModelRepository::changed(const std::string& name) {
  std::lock_guard lock(mutex_);
  const auto dir = dirs_.find(name);
  const auto loaded = loaded_files_.find(name);
  return dir == dirs_.end() || loaded == loaded_files_.end() ||
         files_fingerprint(dir->second) != loaded->second;
}

}  // namespace inflight::frontend
