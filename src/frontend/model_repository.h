// A model repository (Triton's layout): one directory per model, holding the model's files and
// an optional `inflight.json` with the settings `inflight serve` otherwise takes as flags.
//
//   repo/
//     smollm2/  inflight.json  SmolLM2-135M-Instruct.Q4_1.gguf
//     tiny/     inflight.json  config.json  model.safetensors   (a Hugging Face checkpoint)
//
//   inflight.json  {"served_model_name": "tiny", "aliases": ["tiny-llama"],
//                   "gpu_memory_utilization": 0.2, "max_num_seqs": 8, "device": "cuda:0"}
//
// The file is not `config.json`, which a Hugging Face checkpoint in the same directory owns.
// Unknown keys and wrong values are refused naming the file and the key. Relative paths
// ("model", "tokenizer", "chat_template") are relative to the model's directory; without
// "model" the model is the directory's single .gguf file, else the directory itself.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "inflight/config.h"

namespace inflight::frontend {

inline constexpr std::string_view kModelConfigFile = "inflight.json";

// One served model's settings: the serve flags, or a repository's inflight.json over them.
struct ModelSpec {
  std::string name;                  // served name; in a repository, the directory's by default
  std::vector<std::string> aliases;  // more names requests may use
  std::string model;                 // .gguf file or Hugging Face directory
  std::string tokenizer;             // tokenizer file instead of the model's; empty = the model's
  std::string chat_template;         // template file or text; empty = the model's
  std::string device = "auto";       // auto | cpu | cuda | cuda:N
  std::string dtype = "auto";        // compute dtype check (serve's --dtype)
  std::string quantization;          // --quantization
  std::string kv_cache_dtype = "auto";
  std::string kv_cache_memory = "auto";  // parse_kv_cache_memory's text
  // The model's share of its GPU's memory (weights + KV cache + workspace), in (0, 1];
  // 0 = an equal part of what the shares named leave of the budget (plan_memory_shares).
  double gpu_memory_utilization = 0.0;
  int32_t max_model_len = 0;
  int32_t max_num_seqs = EngineConfig{}.max_num_seqs;
  int32_t max_num_batched_tokens = EngineConfig{}.max_num_batched_tokens;
  int32_t block_size = EngineConfig{}.block_size;
  int32_t max_logprobs = EngineConfig{}.max_logprobs;
  bool enable_prefix_caching = true;
};

// The model directories of `repository` (those holding a file or a directory), sorted by name;
// kNotFound when it is not a directory.
std::vector<std::string> list_model_directories(const std::filesystem::path& repository);

// `dir`'s model over `defaults` (the serve flags): `dir`/inflight.json if present, the name
// of `dir` as served name unless the file names one, the model file found in `dir`.
// kInvalidArgument naming the file and the key for an unknown key or a bad value.
ModelSpec read_model_spec(const std::filesystem::path& dir, const ModelSpec& defaults);

// The same, from the text of an inflight.json (`source` names it in errors).
ModelSpec parse_model_spec(std::string_view json_text, const std::string& source,
                           const ModelSpec& defaults);

// Whether `device` is a GPU ("auto" counts as one: on a machine without a GPU the engine
// ignores the share), and the key grouping models that share a GPU ("cuda:0" for auto/cuda).
std::string gpu_key(const std::string& device);

// Splits each GPU's `budget` (a share of its memory, in (0, 1]) between the models on it: a
// model that names gpu_memory_utilization keeps it; the others get equal parts of the rest.
// kInvalidArgument naming the models when the named shares exceed the budget, or leave no
// room for the others. Models on the CPU are left alone.
void plan_memory_shares(std::vector<ModelSpec>& specs, double budget);

// A model of a repository as scanned: its served name and aliases, or, when its inflight.json
// cannot be read, its directory's name and the error (a load reports it).
struct RepositoryModel {
  std::string name;
  std::vector<std::string> aliases;
  std::filesystem::path dir;
  std::string error;
};

// A repository directory followed while the server runs (thread-safe). Built at start: every
// model directory is read and the GPU shares of those that read are planned, which refuses
// what cannot fit (ModelSpec::gpu_memory_utilization). Later scans find directories added
// since (their share is planned when they load) and drop those removed; a model's inflight.json
// is read again each time it is loaded, so an edited file counts at the next load or reload.
// A model's files are fingerprinted when it is loaded (each file under its directory, links
// followed: path, size, modification time), so a reload can be skipped when nothing changed.
class ModelRepository {
 public:
  // `defaults`: the serve flags (a model's share is left to its inflight.json); `budget`: the
  // share of each GPU the models split. kNotFound when `root` is not a directory or holds no
  // model; kInvalidArgument for two directories serving one name (naming both) or shares that
  // do not fit.
  ModelRepository(std::filesystem::path root, ModelSpec defaults, double budget);

  // The models as scanned at start (a model whose inflight.json does not read has `error`).
  const std::vector<RepositoryModel>& initial() const { return initial_; }
  // The models as they are now, in directory order. A directory whose name is taken by an
  // earlier one is left out with a warning.
  std::vector<RepositoryModel> scan();
  // The spec `name` loads with: its inflight.json read again, its share planned beside the
  // others' (kept when the file names none). kNotFound for a name not scanned or a directory
  // gone; kInvalidArgument as read_model_spec and plan_memory_shares, or for a renamed model.
  ModelSpec spec_to_load(const std::string& name);
  // The load spec_to_load began for `name` succeeded: its files as spec_to_load saw them are
  // what `changed` compares with.
  void loaded(const std::string& name);
  // Whether `name`'s files differ from those of its last successful load (true when never
  // loaded, or when its directory is gone).
  bool changed(const std::string& name);

 private:
  std::vector<RepositoryModel> scan_locked(bool at_start);

  std::vector<RepositoryModel> initial_;
  const std::filesystem::path root_;
  const ModelSpec defaults_;
  const double budget_;
  std::mutex mutex_;
  std::map<std::string, std::filesystem::path> dirs_;  // served name -> directory, as scanned
  std::map<std::string, ModelSpec> planned_;           // the specs with their planned shares
  // Served name -> its files' fingerprint when spec_to_load read it, and at its last load.
  std::map<std::string, std::string> reading_files_, loaded_files_;
  std::set<std::string> shadowed_;  // directories left out for a taken name (warned once)
};

}  // namespace inflight::frontend
