// The architecture registry: the one place that maps the names model files give architectures
// (Hugging Face `architectures[0]` / `model_type`, GGUF `general.architecture`) to a family,
// the family's config rules, and the builder of its Model.
//
// Adding an architecture: one file with a Model subclass, one line in registry.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "formats/model_config.h"
#include "formats/model_files.h"
#include "model/weight_source.h"
#include "runtime/backend.h"
#include "runtime/device_runner.h"
#include "runtime/model.h"

namespace inflight {

struct Architecture {
  std::string_view family;                   // the resolved ModelConfig::architecture
  std::vector<std::string_view> hf_names;    // `architectures[0]` and `model_type` values
  std::vector<std::string_view> gguf_names;  // `general.architecture` values
  // What the family implies beyond the generic config keys (e.g. Qwen2's q/k/v biases).
  // Throws Error(kUnsupported) for a variant the family's model does not implement.
  void (*configure)(ModelConfig& config);
  // Weights from `weights`, or dummy weights from `seed` when `weights` is null; this rank's
  // shard and stage of them under `parallel` (model/tensor_parallel.h, model/pipeline_stage.h).
  std::unique_ptr<Model> (*build)(const ModelConfig& config, const WeightSource* weights,
                                  Backend& backend, uint64_t seed,
                                  const ModelParallelism& parallel);
};

const std::vector<Architecture>& architectures();

// `config` with its architecture resolved to a family and the family's rules applied. Accepts an
// already resolved config. Throws Error(kUnsupported) naming the architecture and listing the
// supported names.
ModelConfig resolve_architecture(ModelConfig config);

// The model of `files` on `backend`, its weights converted from their stored format there.
std::unique_ptr<Model> load_model(const ModelFiles& files, Backend& backend);
// A model of `config` with the weights `weights` (tests, weights made in memory); this rank's
// shard and stage of it under `parallel` (whose communicators must outlive the model).
std::unique_ptr<Model> make_model(const ModelConfig& config, const WeightSource& weights,
                                  Backend& backend, const ModelParallelism& parallel = {});
// A model of `config` with dummy weights made on the device from `seed` (performance work).
std::unique_ptr<Model> make_dummy_model(const ModelConfig& config, Backend& backend, uint64_t seed,
                                        const ModelParallelism& parallel = {});

// A runner that owns `backend` and the model built on it: weights from `weights`, or dummy
// weights from `seed` when `weights` is null (model/registry.h builders); this rank's shard and
// stage under the tensor-parallel group `tp` and the pipeline `pp` (null: one rank, one stage).
std::unique_ptr<DeviceRunner> make_runner(std::shared_ptr<Backend> backend,
                                          const ModelConfig& config, const WeightSource* weights,
                                          uint64_t seed = 0, const RunnerOptions& options = {},
                                          std::shared_ptr<Communicator> tp = nullptr,
                                          std::shared_ptr<Communicator> pp = nullptr);

}  // namespace inflight
