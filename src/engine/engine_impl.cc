// The client-facing half of Engine::Impl (any thread) and the public Engine forwarding to it.
#include "engine/engine_impl.h"

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "core/hash.h"
#include "core/logging.h"
#include "tokenizer/tokenizer.h"

namespace inflight {
namespace {

double gib(int64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30);
}

// Makes the automatic KV cache size explicit when `c` sets none: a fraction of a GPU's free
// memory, a fixed size on the host.
void fill_auto_kv_memory(EngineConfig& c, bool host) {
  if (c.num_kv_blocks != 0 || (c.gpu_memory_utilization != 0.0 && !host) ||
      c.kv_cache_memory_fraction != 0.0 || c.kv_cache_bytes != 0) {
    return;
  }
  if (host) {
    c.kv_cache_bytes = EngineConfig::kAutoKvCacheHostBytes;
  } else {
    c.kv_cache_memory_fraction = EngineConfig::kAutoKvCacheFraction;
  }
}

// The KV cache's bytes under `c`'s (explicit) memory settings, with `available` bytes free after
// weights, workspace and reserve on a device of `m.total` bytes.
int64_t planned_kv_bytes(const EngineConfig& c, int64_t per_block, int64_t available,
                         const RunnerMemory& m) {
  if (c.num_kv_blocks > 0) return c.num_kv_blocks * per_block;
  if (c.gpu_memory_utilization > 0.0 && !m.host) {
    // What the share leaves once everything else this engine holds is counted, within what is
    // free. Memory that other engines (a model repository's other models) or processes hold is
    // not this engine's: each engine of a process takes its own share.
    const auto share =
        static_cast<int64_t>(c.gpu_memory_utilization * static_cast<double>(m.total));
    return std::clamp<int64_t>(share - m.weights - m.workspace - m.reserve, 0, available);
  }
  if (c.kv_cache_memory_fraction > 0.0) {
    return static_cast<int64_t>(c.kv_cache_memory_fraction * static_cast<double>(available));
  }
  return c.kv_cache_bytes;
}

// Fills max_num_batched_tokens and max_num_seqs when left at 0 (see inflight/config.h), before
// the workspace is sized for them: on a GPU the sequences follow the KV cache the memory plan
// will leave (the workspace is small next to it and not counted).
EngineConfig with_step_limits(const EngineConfig& config, const ModelRunner& runner) {
  constexpr int64_t kTokensPerSeq = 256, kMinSeqs = 64, kMaxSeqs = 1024;
  EngineConfig c = config;
  if (c.max_num_seqs > 0 && c.max_num_batched_tokens > 0) return c;
  const RunnerMemory m = runner.memory();
  if (c.max_num_batched_tokens == 0) c.max_num_batched_tokens = m.host ? 2048 : 8192;
  if (c.max_num_seqs == 0) {
    int64_t seqs = 256;
    if (!m.host) {
      EngineConfig planned = c;
      fill_auto_kv_memory(planned, m.host);
      const int64_t per_block = runner.kv_bytes_per_block(c.block_size);
      const int64_t available = std::max<int64_t>(0, m.free - m.reserve);
      const int64_t kv_tokens = per_block > 0 ? planned_kv_bytes(planned, per_block, available, m) /
                                                    per_block * c.block_size
                                              : 0;
      seqs = kMinSeqs;
      while (seqs * 2 <= std::min(kMaxSeqs, kv_tokens / kTokensPerSeq)) seqs *= 2;
    }
    c.max_num_seqs = static_cast<int32_t>(seqs);
  }
  INFLIGHT_LOG_INFO("step limits from the memory plan: max_num_seqs {}, max_num_batched_tokens {}",
                    c.max_num_seqs, c.max_num_batched_tokens);
  return c;
}

// Fills max_model_len and num_kv_blocks from the model when left at 0. The KV cache gets what
// the memory plan leaves: the runner's workspace is already reserved, so `runner.memory().free`
// is what remains after weights and workspace; a reserve stays free for the runtime.
Result<EngineConfig> resolve(const EngineConfig& config, const ModelRunner& runner) {
  EngineConfig c = config;
  const int64_t model_len = std::min<int64_t>(runner.model_config().max_position_embeddings,
                                              std::numeric_limits<int32_t>::max());
  if (c.max_model_len == 0) {
    if (model_len <= 0) {
      return Status(StatusCode::kInvalidArgument,
                    "the model does not state its context length: set max_model_len");
    }
    c.max_model_len = static_cast<int32_t>(model_len);
  } else if (model_len > 0 && c.max_model_len > model_len) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("max_model_len = {} exceeds the model's context length {}",
                              c.max_model_len, model_len));
  }
  const int32_t stages = runner.max_steps_in_flight();
  if (c.max_num_micro_batches == 0) {
    c.max_num_micro_batches = stages;
  } else if (c.max_num_micro_batches > stages) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("max_num_micro_batches = {} is more than the model's pipeline "
                              "stages ({}): one micro-batch per stage is in flight at most; set "
                              "at most {}, or 0 for one per stage",
                              c.max_num_micro_batches, stages, stages));
  }
  const int64_t per_block = runner.kv_bytes_per_block(c.block_size);
  const RunnerMemory m = runner.memory();
  const int64_t available = std::max<int64_t>(0, m.free - m.reserve);
  if (c.gpu_memory_utilization > 0.0 && m.host) {
    INFLIGHT_LOG_WARN(
        "gpu_memory_utilization applies to GPUs: the KV cache on {} follows the KV "
        "cache memory setting",
        runner.device_name());
    c.gpu_memory_utilization = 0.0;
  }
  fill_auto_kv_memory(c, m.host);  // recorded in the resolved config
  int64_t kv_bytes = planned_kv_bytes(c, per_block, available, m);
  if (c.num_kv_blocks == 0) {
    c.num_kv_blocks = per_block > 0 ? kv_bytes / per_block : 0;
    if (c.num_kv_blocks < 1) {
      return Status(
          StatusCode::kResourceExhausted,
          fmt::format("a KV cache of {} bytes holds no KV block ({} bytes each); "
                      "raise the KV cache memory{}",
                      kv_bytes, per_block,
                      c.gpu_memory_utilization > 0.0
                          ? fmt::format(" (gpu_memory_utilization {} of {:.2f} GiB "
                                        "leaves nothing after the weights, {:.2f} GiB)",
                                        c.gpu_memory_utilization, gib(m.total), gib(m.weights))
                          : std::string()));
    }
    kv_bytes = c.num_kv_blocks * per_block;
  }
  if (kv_bytes > available) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("the KV cache needs {:.2f} GiB but only {:.2f} GiB of {} memory are "
                              "free after the weights ({:.2f} GiB) and the step workspace ({:.2f} "
                              "GiB); lower the KV cache memory or max_num_batched_tokens",
                              gib(kv_bytes), gib(available), runner.device_name(), gib(m.weights),
                              gib(m.workspace)));
  }
  const int64_t kv_tokens = c.num_kv_blocks * c.block_size;
  INFLIGHT_LOG_INFO(
      "memory plan on {} ({:.2f} GiB, {:.2f} GiB free before the KV cache): weights {:.2f} GiB, "
      "workspace {:.2f} GiB ({} tokens, {} sequences per step), runtime reserve {:.2f} GiB, KV "
      "cache {:.2f} GiB = {} blocks of {} tokens ({} KiB per token) -> at most {} tokens in "
      "flight ({:.1f} sequences of max_model_len {})",
      runner.device_name(), gib(m.total), gib(m.free), gib(m.weights), gib(m.workspace),
      c.max_num_batched_tokens, c.max_num_seqs, gib(m.reserve), gib(kv_bytes), c.num_kv_blocks,
      c.block_size, per_block / c.block_size / 1024, kv_tokens,
      static_cast<double>(kv_tokens) / c.max_model_len, c.max_model_len);
  return c;
}

}  // namespace

Status status_from(const std::exception& e) {
  const auto* err = dynamic_cast<const Error*>(&e);
  if (err == nullptr) return {StatusCode::kInternal, e.what()};
  // A client may see the message of a request's error: without the source location. An
  // internal error keeps it (it is logged, never shown).
  switch (err->code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kInvalidFile:
      return {StatusCode::kInvalidArgument, err->message()};
    case ErrorCode::kUnsupported:
      return {StatusCode::kUnsupported, err->message()};
    case ErrorCode::kOutOfMemory:
      return {StatusCode::kResourceExhausted, err->message()};
    case ErrorCode::kNotFound:
      return {StatusCode::kNotFound, err->message()};
    case ErrorCode::kInternal:
      break;
  }
  return {StatusCode::kInternal, e.what()};
}

Status Engine::Impl::unsupported_masks() const {
  return {StatusCode::kUnsupported,
          fmt::format("structured output is not supported by this engine's model runner ({}): "
                      "it needs the whole vocabulary's logits in the engine's process (no "
                      "vocabulary-split LM head, no pipeline stages)",
                      runner_->device_name())};
}

Engine::Impl::Impl(const EngineConfig& config, std::unique_ptr<ModelRunner> runner,
                   std::shared_ptr<const Tokenizer> tokenizer)
    : config_(config),
      runner_(std::move(runner)),
      tokenizer_(std::move(tokenizer)),
      grammars_(tokenizer_, runner_->model_config().vocab_size),
      overlap_(runner_->asynchronous()),
      depth_(static_cast<size_t>(std::max(config.max_num_micro_batches, 1))),
      kv_(config.num_kv_blocks, config.block_size, config.enable_prefix_caching),
      scheduler_(config, kv_),
      sampler_(runner_->model_config().vocab_size),
      steps_(depth_) {
  const ModelConfig& mc = runner_->model_config();
  for (int64_t id : mc.eos_token_ids) eos_ids_.push_back(static_cast<int32_t>(id));
  if (tokenizer_ != nullptr) {
    const auto eog = tokenizer_->eog_ids();
    eos_ids_.insert(eos_ids_.end(), eog.begin(), eog.end());
  }
  std::sort(eos_ids_.begin(), eos_ids_.end());
  eos_ids_.erase(std::unique(eos_ids_.begin(), eos_ids_.end()), eos_ids_.end());
  limits_ = AdmissionLimits{mc.vocab_size, config_.max_model_len, config_.max_logprobs};
  // An LM head padded past the tokenizer (Qwen2: 151,936 columns for 151,665 tokens): the ids
  // no text has are masked in every step (LogitsRequest::sampled_vocab).
  if (tokenizer_ != nullptr && tokenizer_->vocab_size() < mc.vocab_size) {
    sampled_vocab_ = tokenizer_->vocab_size();
  }
  runner_->set_abandon_flag(&abandon_step_);
  publish_stats();
}

Engine::Impl::~Impl() {
  shutdown(ShutdownMode::kAbort);
}

void Engine::Impl::start() {
  thread_ = std::thread([this] { loop(); });
}

Result<RequestHandle> Engine::Impl::enqueue(Request request) {
  try {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!accepting_) return Status(StatusCode::kUnavailable, "the engine is shutting down");
    }
    Result<PreparedRequest> prepared =
        prepare_request(std::move(request), tokenizer_.get(), limits_, scheduler_);
    if (!prepared.ok()) return prepared.status();
    if (const auto& constraint = prepared.value().params.structured_output) {
      if (!runner_->supports_token_masks()) return unsupported_masks();
      // Compiled here, on the caller's thread: a large schema never stalls the loop.
      Result<std::shared_ptr<const CompiledGrammar>> grammar = grammars_.compile(*constraint);
      if (!grammar.ok()) return grammar.status();
      prepared.value().grammar = std::move(grammar).value();
    }
    const TimePoint now = Clock::now();
    std::lock_guard<std::mutex> lock(mutex_);
    if (!accepting_) return Status(StatusCode::kUnavailable, "the engine is shutting down");
    const RequestId id = next_request_id_++;
    if (config_.seed && !prepared.value().params.seed) {
      prepared.value().seed = splitmix64(*config_.seed + splitmix64(id));
    }
    auto state = std::make_unique<RequestState>(id, std::move(prepared).value(), tokenizer_.get(),
                                                eos_ids_, next_seq_id_++, now);
    RequestHandle handle{id, std::make_shared<OutputStream>(state->stream())};
    live_.insert(id);
    new_requests_.push_back(std::move(state));
    num_enqueued_.fetch_add(1, std::memory_order_relaxed);
    wake_.notify_one();
    return handle;
  } catch (const std::exception& e) {
    return status_from(e);
  }
}

Status Engine::Impl::check_structured_output(const StructuredOutput& constraint) {
  if (!runner_->supports_token_masks()) return unsupported_masks();
  try {
    return grammars_.compile(constraint).status();
  } catch (const std::exception& e) {
    return status_from(e);
  }
}

Status Engine::Impl::cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!live_.contains(id)) {
    return {StatusCode::kNotFound, fmt::format("no live request with id {}", id)};
  }
  cancelled_.push_back(id);
  if (abandonable_.erase(id) == 1 && abandonable_.empty()) {
    abandon_step_.store(true, std::memory_order_relaxed);
  }
  wake_.notify_one();
  return {};
}

EngineStats Engine::Impl::stats() const {
  EngineStats s;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    s = published_;
  }
  s.num_requests_enqueued = num_enqueued_.load(std::memory_order_relaxed);
  {
    // Requests enqueued while a step runs wait in the inbox until it ends: they are waiting
    // too. (Between the loop's taking them and its next publish they are counted nowhere,
    // never twice.)
    std::lock_guard<std::mutex> lock(mutex_);
    s.num_waiting += static_cast<int64_t>(new_requests_.size());
  }
  return s;
}

void Engine::Impl::shutdown(ShutdownMode mode) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    accepting_ = false;
    if (!stop_ || mode == ShutdownMode::kAbort) stop_ = mode;  // abort overrides a drain
  }
  wake_.notify_all();
  std::lock_guard<std::mutex> join(join_mutex_);
  if (thread_.joinable()) thread_.join();
}

// ---- Engine ----------------------------------------------------------------------------------

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config,
                                               std::unique_ptr<ModelRunner> runner,
                                               std::shared_ptr<const Tokenizer> tokenizer) {
  if (runner == nullptr) return Status(StatusCode::kInvalidArgument, "no model runner given");
  if (Status s = config.validate(); !s.ok()) return s;
  try {
    const EngineConfig sized = with_step_limits(config, *runner);
    runner->reserve_workspace(sized.max_num_batched_tokens,
                              sized.max_num_seqs + kMaxPromptLogprobRows);
    Result<EngineConfig> resolved = resolve(sized, *runner);
    if (!resolved.ok()) return resolved.status();
    const EngineConfig& c = resolved.value();
    runner->init_kv_cache(c.num_kv_blocks, c.block_size);
    INFLIGHT_LOG_INFO(
        "engine: {} KV blocks of {} tokens on {}, max_model_len {}, "
        "max_num_seqs {}, max_num_batched_tokens {}, max_num_micro_batches {}",
        c.num_kv_blocks, c.block_size, runner->device_name(), c.max_model_len, c.max_num_seqs,
        c.max_num_batched_tokens, c.max_num_micro_batches);
    auto impl = std::make_unique<Impl>(c, std::move(runner), std::move(tokenizer));
    impl->start();
    return std::unique_ptr<Engine>(new Engine(std::move(impl)));
  } catch (const std::exception& e) {
    return status_from(e);
  }
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<RequestHandle> Engine::enqueue(Request request) {
  return impl_->enqueue(std::move(request));
}
Status Engine::check_structured_output(const StructuredOutput& constraint) {
  return impl_->check_structured_output(constraint);
}
Status Engine::cancel(RequestId id) {
  return impl_->cancel(id);
}
EngineStats Engine::stats() const {
  return impl_->stats();
}
void Engine::shutdown(ShutdownMode mode) {
  impl_->shutdown(mode);
}
const EngineConfig& Engine::config() const {
  return impl_->config();
}
std::shared_ptr<const Tokenizer> Engine::tokenizer() const {
  return impl_->tokenizer();
}
const std::string& Engine::chat_template() const {
  return impl_->model_info().chat_template;
}
const std::string& Engine::model_name() const {
  return impl_->model_info().name;
}
std::string Engine::device_name() const {
  return impl_->device_name();
}
int64_t Engine::vocab_size() const {
  return impl_->vocab_size();
}

}  // namespace inflight
