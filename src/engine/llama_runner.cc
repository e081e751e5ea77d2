#include "engine/llama_runner.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "ops/top_k_logits.h"

namespace inflight {

static_assert(kMaxLogitsTopK == kTopKLogitsMax, "the runner's candidate limit is the op's");

namespace {

// Device memory kept free besides the plan: CUDA graphs, library kernels loaded lazily, the
// runtime's own allocations.
constexpr int64_t kCudaRuntimeReserve = int64_t{512} << 20;

}  // namespace

LlamaRunner::LlamaRunner(std::unique_ptr<Backend> backend, const ModelFiles& files,
                         const RunnerOptions& options)
    : backend_(std::move(backend)) {
  INFLIGHT_CHECK_CODE(backend_ != nullptr, ErrorCode::kInvalidArgument,
                      "LlamaRunner needs a backend");
  model_ = std::make_unique<LlamaModel>(files, *backend_);
  configure(options);
}

LlamaRunner::LlamaRunner(std::unique_ptr<Backend> backend, const ModelConfig& config,
                         const LlamaModel::WeightMap& weights, const RunnerOptions& options)
    : backend_(std::move(backend)) {
  INFLIGHT_CHECK_CODE(backend_ != nullptr, ErrorCode::kInvalidArgument,
                      "LlamaRunner needs a backend");
  model_ = std::make_unique<LlamaModel>(config, weights, *backend_);
  configure(options);
}

LlamaRunner::LlamaRunner(std::unique_ptr<Backend> backend, const ModelConfig& config, uint64_t seed,
                         const RunnerOptions& options)
    : backend_(std::move(backend)) {
  INFLIGHT_CHECK_CODE(backend_ != nullptr, ErrorCode::kInvalidArgument,
                      "LlamaRunner needs a backend");
  model_ = std::make_unique<LlamaModel>(config, *backend_, seed);
  configure(options);
}

std::unique_ptr<LlamaRunner> LlamaRunner::load(std::unique_ptr<Backend> backend,
                                               const std::string& model_path,
                                               const RunnerOptions& options) {
  const std::unique_ptr<ModelFiles> files = ModelFiles::open(model_path);
  return std::make_unique<LlamaRunner>(std::move(backend), *files, options);
}

void LlamaRunner::configure(const RunnerOptions& options) {
  GraphMode mode = options.graph_mode;
  if (mode == GraphMode::kCapture && !backend_->supports_graphs()) mode = GraphMode::kOff;
  model_->set_graph_mode(mode, /*max_batch=*/1);  // widened by reserve_workspace
}

void LlamaRunner::reserve_workspace(int32_t max_num_batched_tokens, int32_t max_num_seqs) {
  max_num_batched_tokens_ = max_num_batched_tokens;
  max_num_seqs_ = max_num_seqs;
  model_->set_graph_mode(model_->graphs().mode(), max_num_seqs);
  model_->reserve(max_num_batched_tokens, max_num_seqs);
  const int64_t rows = DecodeGraphs::round_batch(max_num_seqs);
  lse_dev_ = backend_->alloc({rows}, DType::kF32);
  ids_dev_ = backend_->alloc({rows * kMaxLogitsTopK}, DType::kI32);
  vals_dev_ = backend_->alloc({rows * kMaxLogitsTopK}, DType::kF32);
}

RunnerMemory LlamaRunner::memory() const {
  const MemoryInfo info = backend_->memory_info();
  RunnerMemory m;
  m.total = info.total;
  m.free = info.free;
  m.weights = model_->weight_bytes();
  m.workspace =
      max_num_seqs_ > 0 ? model_->workspace_bytes(max_num_batched_tokens_, max_num_seqs_) : 0;
  m.reserve = backend_->device() == Device::kCuda ? kCudaRuntimeReserve : 0;
  return m;
}

int64_t LlamaRunner::kv_bytes_per_block(int32_t block_size) const {
  return KvCache::bytes_per_block(model_->config(), block_size, backend_->compute_dtype());
}

void LlamaRunner::init_kv_cache(int64_t num_blocks, int32_t block_size) {
  INFLIGHT_CHECK(!cache_.has_value(), "the KV cache is already allocated");
  cache_.emplace(model_->make_kv_cache(num_blocks, block_size));
}

Tensor LlamaRunner::host_view(Tensor& storage, const Shape& shape, DType dtype) {
  int64_t numel = 1;
  for (const int64_t d : shape) numel *= d;
  if (!storage.defined() || storage.numel() < numel) {
    storage = Tensor::empty({std::max<int64_t>(numel, 1)}, dtype);
  }
  return storage.rows(0, numel).reshape(shape);
}

void LlamaRunner::begin_step(const ForwardBatch& batch, const LogitsRequest& request) {
  INFLIGHT_CHECK(cache_.has_value(), "init_kv_cache must run before the first step");
  step_begun_ = false;
  backend_->mark_step_begin();
  const Tensor logits = model_->enqueue(batch, *cache_);  // device [rows, vocab] f32
  const auto rows = static_cast<int32_t>(logits.size(0));
  const int64_t vocab = model_->config().vocab_size;
  result_ = StepLogits();
  result_.num_rows = rows;
  result_.vocab_size = vocab;
  result_.full_index.assign(static_cast<size_t>(rows), -1);

  if (request.top_k > 0 && rows > 0) {
    const int32_t k = request.top_k;
    INFLIGHT_CHECK_CODE(k <= std::min<int64_t>(vocab, kMaxLogitsTopK), ErrorCode::kInvalidArgument,
                        "top_k {} exceeds min(vocab {}, {})", k, vocab, kMaxLogitsTopK);
    if (!lse_dev_.defined() || lse_dev_.numel() < rows) {  // no reserve_workspace (tests)
      lse_dev_ = backend_->alloc({rows}, DType::kF32);
      ids_dev_ = backend_->alloc({int64_t{rows} * kMaxLogitsTopK}, DType::kI32);
      vals_dev_ = backend_->alloc({int64_t{rows} * kMaxLogitsTopK}, DType::kF32);
    }
    const Tensor lse = lse_dev_.rows(0, rows);
    const Tensor ids = ids_dev_.rows(0, int64_t{rows} * k).reshape({rows, k});
    const Tensor vals = vals_dev_.rows(0, int64_t{rows} * k).reshape({rows, k});
    backend_->top_k_logits(logits, k, lse, ids, vals);
    result_.top_k = k;
    result_.log_sum_exp = host_view(lse_host_, {rows}, DType::kF32);
    result_.top_ids = host_view(ids_host_, {rows, k}, DType::kI32);
    result_.top_logits = host_view(vals_host_, {rows, k}, DType::kF32);
    backend_->download(lse, result_.log_sum_exp);
    backend_->download(ids, result_.top_ids);
    backend_->download(vals, result_.top_logits);
  }
  if (!request.full_rows.empty()) {
    const auto n = static_cast<int64_t>(request.full_rows.size());
    result_.full = host_view(full_host_, {n, vocab}, DType::kF32);
    // One copy per run of consecutive rows (all of them, in a step that needs every row).
    for (int64_t j = 0; j < n;) {
      const int32_t first = request.full_rows[static_cast<size_t>(j)];
      INFLIGHT_CHECK_CODE(first >= 0 && first < rows, ErrorCode::kInvalidArgument,
                          "full row {} outside [0, {})", first, rows);
      int64_t len = 1;
      while (j + len < n && request.full_rows[static_cast<size_t>(j + len)] == first + len) ++len;
      backend_->download_f32(logits.rows(first, first + len), result_.full.rows(j, j + len));
      for (int64_t i = 0; i < len; ++i) {
        result_.full_index[static_cast<size_t>(first + i)] = static_cast<int32_t>(j + i);
      }
      j += len;
    }
  }
  backend_->mark_step_end();
  step_begun_ = true;
}

StepLogits& LlamaRunner::end_step() {
  INFLIGHT_CHECK(step_begun_, "end_step without a successful begin_step");
  step_begun_ = false;
  backend_->synchronize();
  return result_;
}

std::optional<StepDeviceTime> LlamaRunner::last_step_device_time() const {
  const std::optional<Backend::StepTime> t = backend_->last_step_time();
  if (!t) return std::nullopt;
  return StepDeviceTime{t->busy_s, t->idle_before_s};
}

}  // namespace inflight
