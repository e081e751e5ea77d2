#include "runtime/device_runner.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "runtime/decode_graphs.h"

namespace inflight {

DeviceRunner::DeviceRunner(std::shared_ptr<Backend> backend, std::unique_ptr<Model> model,
                           const RunnerOptions& options)
    : backend_(std::move(backend)), model_(std::move(model)) {
  INFLIGHT_CHECK_CODE(
      backend_ != nullptr && model_ != nullptr && &model_->backend() == backend_.get(),
      ErrorCode::kInvalidArgument, "a runner needs a backend and a model that lives on it");
  communicator_ = std::make_unique<SingleRankCommunicator>(*backend_);
  GraphMode mode = options.graph_mode;
  if (mode == GraphMode::kCapture && !backend_->supports_graphs()) mode = GraphMode::kOff;
  graphs_ = DecodeGraphs(mode, /*max_batch=*/1);  // widened by reserve_workspace
}

void DeviceRunner::set_graph_mode(GraphMode mode) {
  INFLIGHT_CHECK_CODE(mode != GraphMode::kCapture || backend_->supports_graphs(),
                      ErrorCode::kUnsupported, "the {} backend cannot capture graphs",
                      backend_->name());
  graphs_ = DecodeGraphs(mode, std::max(max_num_seqs_, graphs_.max_batch()));
}

void DeviceRunner::reserve(int64_t tokens, int64_t logits) {
  if (model_->reserve(tokens, logits)) graphs_.clear();  // they point at the old workspace
}

DeviceRunner::Capacity DeviceRunner::capacity() const {
  const int32_t decode = DecodeGraphs::round_batch(max_num_seqs_);
  return {std::max(max_num_batched_tokens_, decode), decode};
}

void DeviceRunner::reserve_workspace(int32_t max_num_batched_tokens, int32_t max_num_seqs) {
  max_num_batched_tokens_ = max_num_batched_tokens;
  max_num_seqs_ = max_num_seqs;
  graphs_ = DecodeGraphs(graphs_.mode(), max_num_seqs);
  const Capacity cap = capacity();
  const int32_t decode = cap.logits;
  reserve(cap.tokens, cap.logits);
  lse_dev_ = backend_->alloc({decode}, DType::kF32);
  ids_dev_ = backend_->alloc({int64_t{decode} * kMaxLogitsTopK}, DType::kI32);
  vals_dev_ = backend_->alloc({int64_t{decode} * kMaxLogitsTopK}, DType::kF32);
}

RunnerMemory DeviceRunner::memory() const {
  const MemoryInfo info = backend_->memory_info();
  RunnerMemory m;
  m.total = info.total;
  m.free = info.free;
  m.weights = model_->weight_bytes();
  if (max_num_seqs_ > 0)
    m.workspace = model_->workspace_bytes(capacity().tokens, capacity().logits);
  m.reserve = backend_->runtime_reserve();
  m.host = info.host;
  return m;
}

int64_t DeviceRunner::kv_bytes_per_block(int32_t block_size) const {
  return KvCache::bytes_per_block(model_->config(), block_size,
                                  KvCache::dtype_for(model_->config(), *backend_));
}

void DeviceRunner::init_kv_cache(int64_t num_blocks, int32_t block_size) {
  INFLIGHT_CHECK(!cache_.has_value(), "the KV cache is already allocated");
  cache_.emplace(model_->make_kv_cache(num_blocks, block_size));
}

Tensor DeviceRunner::enqueue(const ForwardBatch& batch, KvCache& cache) {
  model_->check_step(batch, cache);
  if (const auto bucket = graphs_.bucket_for(batch)) return enqueue_decode(batch, cache, *bucket);
  reserve(batch.num_tokens(), static_cast<int64_t>(batch.logits_indices.size()));
  return model_->run(backend_->upload_batch(batch), cache, abandon_);
}

Tensor DeviceRunner::enqueue_decode(const ForwardBatch& batch, KvCache& cache,
                                    const DecodeGraphs::Bucket& bucket) {
  DecodeGraphs::pad(batch, bucket, padded_);
  reserve(bucket.batch, bucket.batch);
  StepInputs in = backend_->upload_batch(padded_);
  // A bound for every batch of the bucket, so that recorded launch sizes stay valid.
  in.max_context_len = bucket.table_width * cache.block_size();
  const void* inputs = in.slot_mapping.raw();  // the base of the packed inputs
  const int32_t rows = batch.num_seqs();
  if (graphs_.mode() == GraphMode::kCapture) {
    if (const DecodeGraphs::Recorded* recorded = graphs_.find(bucket, inputs)) {
      backend_->replay(*recorded->graph);
      return recorded->logits.rows(0, rows);
    }
  }
  // First use of the bucket (or no capture): run the ops, which also settles every lazily made
  // resource (GEMM plans), then record them without running them again.
  Tensor logits = model_->run(in, cache, abandon_);
  if (graphs_.mode() == GraphMode::kCapture) {
    backend_->begin_capture();
    try {
      logits = model_->run(in, cache, nullptr);
      graphs_.store(bucket, inputs, {backend_->end_capture(), logits});
    } catch (...) {
      backend_->abort_capture();
      throw;
    }
  }
  return logits.rows(0, rows);
}

Tensor DeviceRunner::host_view(Tensor& storage, const Shape& shape, DType dtype) {
  int64_t numel = 1;
  for (const int64_t d : shape) numel *= d;
  if (!storage.defined() || storage.numel() < numel) {
    storage = Tensor::empty({std::max<int64_t>(numel, 1)}, dtype);
  }
  return storage.rows(0, numel).reshape(shape);
}

void DeviceRunner::begin_step(const ForwardBatch& batch, const LogitsRequest& request) {
  INFLIGHT_CHECK(cache_.has_value(), "init_kv_cache must run before the first step");
  step_begun_ = false;
  backend_->mark_step_begin();
  const Tensor logits = enqueue(batch, *cache_);  // device [rows, vocab] f32
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

StepLogits& DeviceRunner::end_step() {
  INFLIGHT_CHECK(step_begun_, "end_step without a successful begin_step");
  step_begun_ = false;
  backend_->synchronize();
  return result_;
}

std::optional<StepDeviceTime> DeviceRunner::last_step_device_time() const {
  const std::optional<Backend::StepTime> t = backend_->last_step_time();
  if (!t) return std::nullopt;
  return StepDeviceTime{t->busy_s, t->idle_before_s};
}

}  // namespace inflight
