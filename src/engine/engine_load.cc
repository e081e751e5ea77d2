// Engine::load: from a ModelSource to a running engine. The one place the tools, the tests and
// the bindings build an engine from a path or dummy shapes: backend by device name, model by
// architecture (model/registry.h), tokenizer and chat template from the model's files.
#include <chrono>
#include <exception>
#include <optional>
#include <string>

#include "backend/backend_factory.h"
#include "core/check.h"
#include "core/logging.h"
#include "engine/engine_impl.h"
#include "formats/model_files.h"
#include "model/arch_presets.h"
#include "model/registry.h"
#include "parallel/parallel_runner.h"
#include "parallel/world.h"
#include "runtime/device_runner.h"
#include "tokenizer/tokenizer.h"

namespace inflight {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The model's quantization as `source` asks (the checkpoint's own, or online FP8) and its KV
// cache's dtype.
void apply_quantization(const ModelSource& source, ModelConfig& config) {
  if (!source.quantization.empty()) {
    const Quantization online = Quantization::online(source.quantization);  // checks the name
    if (!config.quantization.enabled()) {
      const bool fp8_kv_cache = config.quantization.fp8_kv_cache;
      config.quantization = online;
      config.quantization.fp8_kv_cache = fp8_kv_cache;
    }
  }
  const std::string& kv = source.kv_cache_dtype;
  if (kv == "fp8" || kv == "fp8_e4m3") {
    config.quantization.fp8_kv_cache = true;
  } else if (kv == "bf16" || kv == "bfloat16") {
    config.quantization.fp8_kv_cache = false;
  } else {
    INFLIGHT_CHECK_CODE(kv == "auto" || kv.empty(), ErrorCode::kInvalidArgument,
                        "kv_cache_dtype '{}' is not supported (supported: auto, bf16, fp8)", kv);
  }
  if (config.quantization.enabled() || config.quantization.fp8_kv_cache) {
    INFLIGHT_LOG_INFO("quantization: {}", config.quantization.describe());
  }
}

// The device of this rank: the GPU of its local rank under tensor parallelism.
std::string rank_device(const ModelSource& source, const World& world) {
  if (world.size() == 1) return source.device;
  const std::string device = resolve_device(source.device);
  if (device == "cpu") return device;
  INFLIGHT_CHECK_CODE(device == "cuda" || device == "cuda:0", ErrorCode::kInvalidArgument,
                      "--device {}: under tensor parallelism each rank takes the GPU of its local "
                      "rank; give --device cuda (or auto)",
                      source.device);
  return "cuda:" + std::to_string(world.local_rank());
}

// What one rank loads: its backend and the runner of its shard of the model, the tokenizer and
// chat template (rank 0), and what was loaded.
struct LoadedShard {
  std::unique_ptr<DeviceRunner> runner;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string name;  // the path, or the dummy architecture
  std::string chat_template;
};

// This rank's shard of the model over `backend` (rank `rank` of `ranks`), with the tokenizer
// and chat template when asked.
LoadedShard load_model(const ModelSource& source, bool with_tokenizer,
                       std::shared_ptr<Backend> backend, const World::Groups& groups, int rank,
                       int ranks) {
  const auto begin = std::chrono::steady_clock::now();
  const bool dummy = !source.dummy_arch.empty() || !source.dummy_config.empty();
  const ModelParallelism parallel{groups.tp.get(), groups.pp.get()};
  LoadedShard out;
  std::unique_ptr<Model> model;
  if (dummy) {
    out.name = source.dummy_arch.empty() ? source.dummy_config : source.dummy_arch;
    if (with_tokenizer && !source.tokenizer.empty()) {
      out.tokenizer = Tokenizer::from_path(source.tokenizer);
    }
    ModelConfig config = dummy_model_config(source.dummy_arch, source.dummy_config);
    apply_quantization(source, config);
    model = make_dummy_model(config, *backend, source.dummy_seed, parallel);
  } else {
    out.name = source.path;
    const std::unique_ptr<ModelFiles> files = ModelFiles::open(source.path);
    if (with_tokenizer) {
      out.tokenizer = Tokenizer::from_path(source.tokenizer.empty() ? files->tokenizer_path()
                                                                    : source.tokenizer);
      out.chat_template = files->chat_template();
    }
    const double opened = seconds_since(begin);
    const auto weights_begin = std::chrono::steady_clock::now();
    ModelConfig config = files->config();
    apply_quantization(source, config);
    model = make_model(config, weights_of(*files), *backend, parallel);
    backend->synchronize();  // the last copies of the weights
    const double loaded = seconds_since(weights_begin);
    INFLIGHT_LOG_INFO(
        "loaded {}{}: files and tokenizer {:.2f} s, weights {:.2f} GiB in {:.2f} s "
        "({:.1f} GiB/s, converted from their stored format on {})",
        source.path, ranks > 1 ? fmt::format(" (rank {} of {})", rank, ranks) : "", opened,
        static_cast<double>(model->weight_bytes()) / (1 << 30), loaded,
        static_cast<double>(model->weight_bytes()) / (1 << 30) / std::max(loaded, 1e-9),
        backend->name());
  }
  out.runner = std::make_unique<DeviceRunner>(std::move(backend), std::move(model), RunnerOptions{},
                                              groups.tp, groups.pp);
  return out;
}

// Runs `load` (a part of loading this rank's shard), then agrees with every other rank on how it
// went: each rank's error (empty when it loaded) goes to every rank. When one failed, every rank
// throws, the failed ones their own error and the others one naming the failed ranks and their
// causes, and the job is over for all (World::end). Without it a rank that fails alone would
// leave the others waiting for it in their next collective.
template <typename F>
void on_every_rank(World& world, F&& load) {
  if (world.size() == 1) return load();
  std::exception_ptr failure;
  std::string mine;  // "<ErrorCode>:<message>", empty when this rank loaded
  try {
    load();
  } catch (const std::exception& e) {
    failure = std::current_exception();
    const auto* err = dynamic_cast<const Error*>(&e);
    const ErrorCode code = err != nullptr ? err->code() : ErrorCode::kInternal;
    mine = fmt::format("{}:{}", static_cast<int>(code), err != nullptr ? err->message() : e.what());
  }
  const std::vector<std::string> all = world.all_gather(mine);
  std::string failed;
  std::optional<ErrorCode> code;
  for (int r = 0; r < world.size(); ++r) {
    const std::string& e = all[static_cast<size_t>(r)];
    if (e.empty()) continue;
    const size_t colon = e.find(':');
    if (!code) code = static_cast<ErrorCode>(std::stoi(e.substr(0, colon)));
    failed += fmt::format("{}rank {} of {} failed to load: {}", failed.empty() ? "" : "; ", r,
                          world.size(), e.substr(colon + 1));
  }
  if (!code) return;
  world.end();
  if (failure) std::rethrow_exception(failure);
  INFLIGHT_THROW(*code, "{}", failed);
}

LoadedShard load_shard(const ModelSource& source, bool with_tokenizer) {
  const bool dummy = !source.dummy_arch.empty() || !source.dummy_config.empty();
  INFLIGHT_CHECK_CODE(dummy != !source.path.empty(), ErrorCode::kInvalidArgument,
                      "give either a model path or dummy weights (an architecture or a "
                      "config.json)");
  INFLIGHT_CHECK_CODE(source.tensor_parallel_size >= 1 && source.pipeline_parallel_size >= 1,
                      ErrorCode::kInvalidArgument,
                      "tensor_parallel_size {} and pipeline_parallel_size {} must be at least 1",
                      source.tensor_parallel_size, source.pipeline_parallel_size);
  const int ranks = source.tensor_parallel_size * source.pipeline_parallel_size;
  World& world = ranks > 1 ? World::get() : World::single();
  INFLIGHT_CHECK_CODE(ranks > 1 || World::environment_size() <= 1, ErrorCode::kInvalidArgument,
                      "launched as {} processes by mpirun, but the model is not split (give "
                      "--tensor-parallel-size and --pipeline-parallel-size whose product is {})",
                      World::environment_size(), World::environment_size());
  INFLIGHT_CHECK_CODE(world.size() == ranks, ErrorCode::kInvalidArgument,
                      "tensor parallel size {} x pipeline parallel size {} needs {} processes, one "
                      "per rank, and this job has {} (launch them with `mpirun -np {} inflight "
                      "...`, or let `inflight serve` start them)",
                      source.tensor_parallel_size, source.pipeline_parallel_size, ranks,
                      world.size(), ranks);
  INFLIGHT_CHECK_CODE(!world.ended(), ErrorCode::kInvalidArgument,
                      "this process's parallel job has ended (its engine stopped, or a rank "
                      "failed to load): one parallel job per process");
  std::shared_ptr<Backend> backend;
  on_every_rank(world, [&] { backend = make_backend(rank_device(source, world)); });
  const World::Groups groups = world.make_groups(*backend, source.tensor_parallel_size);
  LoadedShard out;
  on_every_rank(world, [&] {
    out = load_model(source, with_tokenizer, std::move(backend), groups, world.rank(), ranks);
  });
  return out;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::load(const ModelSource& source,
                                             const EngineConfig& config) {
  try {
    const auto begin = std::chrono::steady_clock::now();
    LoadedShard shard = load_shard(source, /*with_tokenizer=*/true);
    std::unique_ptr<ModelRunner> runner = std::move(shard.runner);
    if (source.tensor_parallel_size * source.pipeline_parallel_size > 1) {
      runner = std::make_unique<ParallelRunner>(
          std::unique_ptr<DeviceRunner>(static_cast<DeviceRunner*>(runner.release())),
          World::get());
    }
    Result<std::unique_ptr<Engine>> engine = create(config, std::move(runner), shard.tokenizer);
    if (!engine.ok()) return engine.status();
    engine.value()->impl_->set_model_info({std::move(shard.name), std::move(shard.chat_template)});
    INFLIGHT_LOG_INFO("engine ready in {:.2f} s", seconds_since(begin));
    return engine;
  } catch (const std::exception& e) {
    return status_from(e);
  }
}

Status Engine::run_worker(const ModelSource& source) {
  try {
    World& world = World::get();
    INFLIGHT_CHECK_CODE(world.rank() != 0, ErrorCode::kInvalidArgument,
                        "rank 0 runs the engine (Engine::load), not a worker");
    LoadedShard shard = load_shard(source, /*with_tokenizer=*/false);
    serve_steps(*shard.runner, world);  // until rank 0 stops this rank
    world.leave();
    return Status();
  } catch (const std::exception& e) {
    return status_from(e);
  }
}

int Engine::join_parallel_job() {
  return World::get().rank();
}

Status Engine::start_workers(const ModelSource& source, const std::vector<std::string>& command) {
  try {
    World::spawn_workers(source.tensor_parallel_size * source.pipeline_parallel_size, command);
    return Status();
  } catch (const std::exception& e) {
    return status_from(e);
  }
}

}  // namespace inflight
