#include "runtime/device_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/check.h"
#include "runtime/decode_graphs.h"

namespace inflight {

DeviceRunner::DeviceRunner(std::shared_ptr<Backend> backend, std::unique_ptr<Model> model,
                           const RunnerOptions& options, std::shared_ptr<Communicator> tp,
                           std::shared_ptr<Communicator> pp)
    : backend_(std::move(backend)),
      communicator_(std::move(tp)),
      pipeline_(std::move(pp)),
      model_(std::move(model)) {
  INFLIGHT_CHECK_CODE(
      backend_ != nullptr && model_ != nullptr && &model_->backend() == backend_.get(),
      ErrorCode::kInvalidArgument, "a runner needs a backend and a model that lives on it");
  if (communicator_ == nullptr) communicator_ = std::make_shared<SingleRankCommunicator>(*backend_);
  const int64_t vocab = model_->config().vocab_size;
  const int64_t shard = model_->shard_config().vocab_size;
  INFLIGHT_CHECK_CODE(!model_->last_stage() || shard == vocab ||
                          (shard * communicator_->world_size() == vocab &&
                           model_->vocab_begin() == communicator_->rank() * shard),
                      ErrorCode::kInvalidArgument,
                      "rank {} of {} holds vocabulary columns [{}, {}) of {}: a vocabulary split "
                      "must give every rank an equal range in rank order",
                      communicator_->rank(), communicator_->world_size(), model_->vocab_begin(),
                      model_->vocab_begin() + shard, vocab);
  GraphMode mode = options.graph_mode;
  if (mode == GraphMode::kCapture && !backend_->supports_graphs()) mode = GraphMode::kOff;
  graphs_ = DecodeGraphs(mode, /*max_batch=*/1);  // widened by reserve_workspace
}

bool DeviceRunner::supports_token_masks() const {
  return model_->last_stage() && model_->shard_config().vocab_size == model_->config().vocab_size;
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
  device_view(lse_dev_, {decode}, DType::kF32);
  device_view(ids_dev_, {decode, kMaxLogitsTopK}, DType::kI32);
  device_view(vals_dev_, {decode, kMaxLogitsTopK}, DType::kF32);
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
  return model_->kv_bytes_per_block(block_size);
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

Tensor DeviceRunner::device_view(Tensor& storage, const Shape& shape, DType dtype) {
  int64_t numel = 1;
  for (const int64_t d : shape) numel *= d;
  if (!storage.defined() || storage.numel() < numel) {
    storage = backend_->alloc({std::max<int64_t>(numel, 1)}, dtype);
  }
  return storage.rows(0, numel).reshape(shape);
}

void DeviceRunner::gather_shards(const Tensor& logits, const LogitsRequest& request) {
  Communicator& tp = *communicator_;
  const int ranks = tp.world_size();
  const bool leader = tp.rank() == 0;
  const auto rows = static_cast<int32_t>(logits.size(0));
  const int64_t vocab = logits.size(1);
  Shards& s = shards_;
  s.pending = leader;
  s.vocab = vocab;
  s.full_rows = request.full_rows;
  s.k = 0;
  if (request.top_k > 0 && rows > 0) {
    // Each rank's k best hold the k best overall (k <= ranks * min(k, shard vocab)).
    s.k = static_cast<int32_t>(std::min<int64_t>(request.top_k, vocab));
    const int64_t n = int64_t{rows} * s.k;
    const Tensor lse = device_view(lse_dev_, {rows}, DType::kF32);
    const Tensor ids = device_view(ids_dev_, {rows, s.k}, DType::kI32);
    const Tensor vals = device_view(vals_dev_, {rows, s.k}, DType::kF32);
    backend_->top_k_logits(logits, s.k, lse, ids, vals);
    const Tensor all_lse = device_view(s.lse_dev, {ranks * int64_t{rows}}, DType::kF32);
    const Tensor all_ids = device_view(s.ids_dev, {ranks * n}, DType::kI32);
    const Tensor all_vals = device_view(s.vals_dev, {ranks * n}, DType::kF32);
    tp.all_gather(lse, all_lse);
    tp.all_gather(ids.reshape({n}), all_ids);
    tp.all_gather(vals.reshape({n}), all_vals);
    if (leader) {
      s.lse = host_view(s.lse_storage, all_lse.shape(), DType::kF32);
      s.ids = host_view(s.ids_storage, all_ids.shape(), DType::kI32);
      s.vals = host_view(s.vals_storage, all_vals.shape(), DType::kF32);
      backend_->download(all_lse, s.lse);
      backend_->download(all_ids, s.ids);
      backend_->download(all_vals, s.vals);
    }
  }
  if (!request.full_rows.empty() && rows > 0) {
    const Tensor all = device_view(s.full_dev, {ranks * int64_t{rows}, vocab}, DType::kF32);
    tp.all_gather(logits, all);
    if (leader) {
      s.full = host_view(s.full_storage, all.shape(), DType::kF32);
      backend_->download(all, s.full);
    }
  }
}

void DeviceRunner::merge_shards() {
  Shards& s = shards_;
  s.pending = false;
  const int ranks = communicator_->world_size();
  const int32_t rows = result_.num_rows;
  const int64_t vocab = result_.vocab_size;
  if (s.k > 0) {
    const int32_t k = result_.top_k;
    const auto* lse = s.lse.data<float>();
    const auto* ids = s.ids.data<int32_t>();
    const auto* vals = s.vals.data<float>();
    auto* out_lse = result_.log_sum_exp.data<float>();
    auto* out_ids = result_.top_ids.data<int32_t>();
    auto* out_vals = result_.top_logits.data<float>();
    std::vector<std::pair<float, int32_t>> row;  // (logit, vocabulary id)
    for (int32_t r = 0; r < rows; ++r) {
      float max_lse = -std::numeric_limits<float>::infinity();
      for (int q = 0; q < ranks; ++q) max_lse = std::max(max_lse, lse[int64_t{q} * rows + r]);
      double sum = 0.0;
      for (int q = 0; q < ranks; ++q) sum += std::exp(double{lse[int64_t{q} * rows + r]} - max_lse);
      out_lse[r] = std::isfinite(max_lse) ? max_lse + static_cast<float>(std::log(sum)) : max_lse;
      row.clear();
      for (int q = 0; q < ranks; ++q) {
        const int64_t at = (int64_t{q} * rows + r) * s.k;
        for (int32_t j = 0; j < s.k; ++j) {
          row.emplace_back(vals[at + j], static_cast<int32_t>(q * s.vocab + ids[at + j]));
        }
      }
      // Best first, equal logits by lower id (ops/top_k_logits.h).
      std::partial_sort(row.begin(), row.begin() + k, row.end(), [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
      });
      for (int32_t j = 0; j < k; ++j) {
        out_vals[int64_t{r} * k + j] = row[static_cast<size_t>(j)].first;
        out_ids[int64_t{r} * k + j] = row[static_cast<size_t>(j)].second;
      }
    }
  }
  if (!s.full_rows.empty()) {
    const auto* all = s.full.data<float>();  // [ranks, rows, shard vocab]
    for (size_t j = 0; j < s.full_rows.size(); ++j) {
      float* dst = result_.full.data<float>() + static_cast<int64_t>(j) * vocab;
      for (int q = 0; q < ranks; ++q) {
        std::copy_n(all + (int64_t{q} * rows + s.full_rows[j]) * s.vocab, s.vocab,
                    dst + q * s.vocab);
      }
    }
  }
}

void DeviceRunner::begin_step(const ForwardBatch& batch, const LogitsRequest& request) {
  INFLIGHT_CHECK(cache_.has_value(), "init_kv_cache must run before the first step");
  step_begun_ = false;
  backend_->mark_step_begin();
  const Tensor logits = enqueue(batch, *cache_);  // device [rows, shard vocab] f32
  result_ = StepLogits();
  if (!model_->last_stage()) {  // a pipeline stage before the last: no logits here
    backend_->mark_step_end();
    step_begun_ = true;
    return;
  }
  const auto rows = static_cast<int32_t>(logits.size(0));
  const int64_t vocab = model_->config().vocab_size;
  result_.num_rows = rows;
  result_.vocab_size = vocab;
  result_.full_index.assign(static_cast<size_t>(rows), -1);
  INFLIGHT_CHECK_CODE(request.top_k <= std::min<int64_t>(vocab, kMaxLogitsTopK),
                      ErrorCode::kInvalidArgument, "top_k {} exceeds min(vocab {}, {})",
                      request.top_k, vocab, kMaxLogitsTopK);
  const bool sharded = logits.size(1) != vocab;  // this rank's vocabulary columns
  if (request.sampled_vocab > 0) {
    // This rank's columns are [vocab_begin, vocab_begin + shard): mask those past the tokenizer.
    const int64_t shard = logits.size(1);
    const int64_t begin =
        std::clamp<int64_t>(request.sampled_vocab - model_->vocab_begin(), 0, shard);
    if (begin < shard) backend_->mask_vocab_padding(logits, begin);
  }
  if (!request.masked_rows.empty()) {
    INFLIGHT_CHECK_CODE(!sharded, ErrorCode::kUnsupported,
                        "structured output under a vocabulary-split LM head is not supported");
    apply_masks(logits, request);
  }
  if (sharded) gather_shards(logits, request);

  if (request.top_k > 0 && rows > 0) {
    const int32_t k = request.top_k;
    result_.top_k = k;
    result_.log_sum_exp = host_view(lse_host_, {rows}, DType::kF32);
    result_.top_ids = host_view(ids_host_, {rows, k}, DType::kI32);
    result_.top_logits = host_view(vals_host_, {rows, k}, DType::kF32);
    if (!sharded) {
      const Tensor lse = device_view(lse_dev_, {rows}, DType::kF32);
      const Tensor ids = device_view(ids_dev_, {rows, k}, DType::kI32);
      const Tensor vals = device_view(vals_dev_, {rows, k}, DType::kF32);
      backend_->top_k_logits(logits, k, lse, ids, vals);
      backend_->download(lse, result_.log_sum_exp);
      backend_->download(ids, result_.top_ids);
      backend_->download(vals, result_.top_logits);
    }
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
      if (!sharded) {
        backend_->download_f32(logits.rows(first, first + len), result_.full.rows(j, j + len));
      }
      for (int64_t i = 0; i < len; ++i) {
        result_.full_index[static_cast<size_t>(first + i)] = static_cast<int32_t>(j + i);
      }
      j += len;
    }
  }
  backend_->mark_step_end();
  step_begun_ = true;
}

void DeviceRunner::apply_masks(const Tensor& logits, const LogitsRequest& request) {
  INFLIGHT_CHECK_CODE(request.fill_masks != nullptr, ErrorCode::kInvalidArgument,
                      "masked rows without fill_masks");
  const auto m = static_cast<int64_t>(request.masked_rows.size());
  const int64_t words = (logits.size(1) + 31) / 32;
  const Tensor rows = host_view(mask_rows_host_, {m}, DType::kI32);
  std::copy(request.masked_rows.begin(), request.masked_rows.end(), rows.data<int32_t>());
  const Tensor bits = host_view(mask_bits_host_, {m, words}, DType::kI32);
  request.fill_masks(std::span<uint32_t>(reinterpret_cast<uint32_t*>(bits.data<int32_t>()),
                                         static_cast<size_t>(m * words)));
  backend_->apply_token_bitmask(logits, rows, bits);
}

StepLogits& DeviceRunner::end_step() {
  INFLIGHT_CHECK(step_begun_, "end_step without a successful begin_step");
  step_begun_ = false;
  backend_->synchronize();
  if (shards_.pending) merge_shards();
  return result_;
}

std::optional<StepDeviceTime> DeviceRunner::last_step_device_time() const {
  const std::optional<Backend::StepTime> t = backend_->last_step_time();
  if (!t) return std::nullopt;
  return StepDeviceTime{t->busy_s, t->idle_before_s};
}

}  // namespace inflight
