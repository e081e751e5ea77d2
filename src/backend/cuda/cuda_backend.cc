// CudaBackend: Backend on one GPU. Owns non-blocking streams (one unless asked for more; every
// copy and kernel goes on the current one, in order), a caching device allocator, the cuBLASLt
// handle with its workspace and per-shape algorithm cache, and three pinned staging areas:
//   step staging     upload_batch packs the ForwardBatch arrays here (StepInputLayout) and
//                    sends them in one cudaMemcpyAsync to a device buffer reused every step;
//   upload staging   two 64 MiB halves: upload() and load_weight() convert (or copy) host rows
//                    into one half on the thread pool while the other half's copy runs;
//   download staging download_f32 / download copy device tensors here; synchronize() waits
//                    for the stream and then converts (or copies) them into the callers' host
//                    tensors.
// Graphs: begin_capture / end_capture record the ops enqueued in between on the stream as a
// CUDA graph (thread-local capture mode); replay launches it on the same stream. While
// capturing, anything that would allocate, copy or wait is refused with an error.
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_allocator.h"
#include "backend/cuda/nccl_communicator.h"
#include "core/thread_pool.h"
#include "ops/cuda_check.h"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's advice for Hopper
// Kept free besides the memory plan: CUDA graphs, library kernels loaded lazily, the
// runtime's own allocations.
constexpr int64_t kRuntimeReserve = int64_t{512} << 20;
constexpr size_t kUploadChunkBytes = size_t{64} << 20;

bool is_float(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16;
}

// dst[i] = f32 -> `dtype` of src[i] for i < n, on the thread pool for large n.
void convert_from_f32(const float* src, void* dst, DType dtype, int64_t n) {
  if (dtype == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  auto* out = static_cast<uint16_t*>(dst);
  const bool bf16 = dtype == DType::kBF16;
  ThreadPool::global().parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          out[i] = bf16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
      },
      /*min_chunk=*/int64_t{1} << 16);
}

// dst[i] = f32 of src[i] (`dtype`) for i < n.
void convert_to_f32(const void* src, DType dtype, float* dst, int64_t n) {
  if (dtype == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const auto* in = static_cast<const uint16_t*>(src);
  const bool bf16 = dtype == DType::kBF16;
  ThreadPool::global().parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          dst[i] = bf16 ? bf16_to_f32(in[i]) : f16_to_f32(in[i]);
      },
      /*min_chunk=*/int64_t{1} << 16);
}

void check_device_index(int device) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  INFLIGHT_CHECK_CODE(err == cudaSuccess && device >= 0 && device < count,
                      ErrorCode::kInvalidArgument,
                      "CUDA device {} does not exist ({} devices; cudaGetDeviceCount: {})", device,
                      count, cudaGetErrorString(err));
}

class CudaGraph final : public BackendGraph {
 public:
  explicit CudaGraph(cudaGraphExec_t exec) : exec_(exec) {}
  ~CudaGraph() override {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);  // errors ignored in a destructor
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaGraphExec_t exec_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, const CudaBackendOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  Device device() const override { return Device::cuda(device_); }
  DType compute_dtype() const override { return DType::kBF16; }
  bool asynchronous() const override { return true; }
  int64_t runtime_reserve() const override { return kRuntimeReserve; }

  Tensor alloc(const Shape& shape, DType dtype) override;
  Tensor upload(const Tensor& host_f32, DType dtype) override;
  void load_weight(const StoredTensor& w, const Tensor& dst) override;
  void download_f32(const Tensor& src, const Tensor& dst) override;
  void download(const Tensor& src, const Tensor& dst) override;
  void copy(const Tensor& src, const Tensor& dst) override;
  void synchronize() override;
  MemoryInfo memory_info() const override;

  void mark_step_begin() override;
  void mark_step_end() override;
  std::optional<StepTime> last_step_time() const override;

  int32_t num_streams() const override { return static_cast<int32_t>(streams_.size()); }
  void join_stream(int32_t waiter, int32_t signaller) override;

  std::vector<uint8_t> communicator_id() const override { return nccl_unique_id(); }
  std::unique_ptr<Communicator> make_communicator(int rank, int size,
                                                  const std::vector<uint8_t>& id) override {
    return make_nccl_communicator(
        device_, [this] { return stream_; }, rank, size, id);
  }

  bool supports_graphs() const override { return true; }
  void begin_capture() override;
  std::unique_ptr<BackendGraph> end_capture() override;
  void abort_capture() noexcept override;
  void replay(const BackendGraph& graph) override;

  StepInputs upload_batch(const ForwardBatch& batch) override;

  void gather_rows(const Tensor& src, const Tensor& indices, const Tensor& dst,
                   int64_t first_index) override;
  void rms_norm(const Tensor* add, const Tensor& residual, const Tensor& weight, float eps,
                const Tensor& out) override;
  void gemm(const Tensor& x, const Linear& w, const Tensor& y) override;
  void rope_kv_write(const Tensor& qkv, const StepInputs& in, const Tensor& inv_freq,
                     const Tensor& q_out, const KvCacheLayer& kv) override;
  void paged_attention(const Tensor& q, const KvCacheLayer& kv, const StepInputs& in, float scale,
                       int32_t sliding_window, const Tensor* alibi_slopes,
                       const Tensor& out) override;
  void swiglu(const Tensor& gate_up, const Tensor& out) override;
  void rms_norm_quantized(const Tensor* add, const Tensor& residual, const Tensor& weight,
                          float eps, const Tensor& out, const Linear& w,
                          const QuantizedActivations& q) override;
  void swiglu_quantized(const Tensor& gate_up, const Tensor& out, const Linear& w,
                        const QuantizedActivations& q) override;
  void layer_norm(const Tensor* add, const Tensor& residual, const Tensor& weight,
                  const Tensor* bias, float eps, const Tensor& out) override;
  void gelu(const Tensor& x, const Tensor& out) override;
  void gemm_gelu(const Tensor& x, const Linear& w, const Tensor& y) override;
  void clamp(const Tensor& x, float limit) override;
  void qk_norm(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads, const Tensor& q_weight,
               const Tensor& k_weight, float eps) override;
  void moe_route(const Tensor& logits, int32_t k, bool renormalize, const Tensor& ids,
                 const Tensor& weights) override;
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Linear& gate_up,
                   const Linear& down, const MoeWorkspace& ws, const Tensor& out) override;
  // FP8 tensor cores: compute capability 8.9 and up.
  bool supports_fp8() const override { return fp8_; }
  void quantize_fp8(const Tensor& x, const Tensor* static_scale, int64_t group,
                    const Tensor& values, const Tensor& scales) override;
  void gemm(const QuantizedActivations& x, const Linear& w, const Tensor& y) override;
  int64_t gemm_padded_rows(const Linear& w, int64_t rows) const override;
  void fill_random(const Tensor& t, uint64_t seed, float scale, float offset,
                   const RandomWindow& window) override;
  void top_k_logits(const Tensor& logits, int32_t k, const Tensor& log_sum_exp,
                    const Tensor& top_ids, const Tensor& top_logits) override;
  void apply_token_bitmask(const Tensor& logits, const Tensor& rows,
                           const Tensor& bitmask) override;
  void mask_vocab_padding(const Tensor& logits, int64_t begin) override;

 private:
  // A download waiting for synchronize(): numel elements of src_dtype at `offset` in the
  // download staging buffer, to be converted (or, raw, copied bit for bit) into dst.
  struct PendingDownload {
    size_t offset;
    Tensor dst;
    DType src_dtype;
    int64_t numel;
    bool raw;
  };

  void on_stream_change(int32_t index) override;
  // Enqueues the device -> staging copy of src; the caller records what to do at synchronize().
  size_t stage_download(const Tensor& src);
  void check_not_capturing(const char* what) const;
  // Makes device_ current on the calling thread (step entry points call it).
  void bind() const;

  const int device_;
  const CudaBackendOptions options_;
  bool fp8_ = false;  // the device has FP8 tensor cores
  bool capturing_ = false;
  std::vector<cudaStream_t> streams_;      // options_.num_streams, non-blocking
  std::vector<cudaEvent_t> stream_marks_;  // [i]: recorded on streams_[i] by join_stream
  cudaStream_t stream_ = nullptr;          // the current stream: every op is enqueued here
  std::shared_ptr<CudaAllocator> allocator_;
  std::shared_ptr<void> gemm_workspace_;
  std::unique_ptr<CublasLtGemm> gemm_;
  // Partials of top_k_logits over few rows: kTopKLogitsCudaWorkspaceBytes, zeroed once here.
  std::shared_ptr<void> top_k_workspace_;
  // apply_token_bitmask's device copies of its row indices and masks, grown on demand.
  Tensor mask_rows_, mask_bits_;

  PinnedBuffer step_staging_;
  cudaEvent_t step_copied_ = nullptr;  // the last step copy is done: step_staging_ is free
  Tensor step_buffer_;                 // [capacity] u8 on the device

  PinnedBuffer upload_staging_[2];
  cudaEvent_t upload_copied_[2] = {nullptr, nullptr};  // upload_staging_[i] is free

  PinnedBuffer download_staging_;
  size_t download_used_ = 0;
  std::vector<PendingDownload> pending_;

  // Step timing: events of the last two steps (index: step parity), so that the previous
  // step's end is still there when the current one is measured.
  cudaEvent_t step_begin_[2] = {nullptr, nullptr};
  cudaEvent_t step_end_[2] = {nullptr, nullptr};
  int64_t steps_marked_ = 0;  // steps whose end was marked
};

CudaBackend::CudaBackend(int device, const CudaBackendOptions& options)
    : device_(device), options_(options) {
  check_device_index(device);
  INFLIGHT_CUDA_CHECK(cudaSetDevice(device));
  INFLIGHT_CHECK_CODE(options.num_streams >= 1 && options.num_streams <= 64,
                      ErrorCode::kInvalidArgument, "cuda backend: {} streams (1 to 64)",
                      options.num_streams);
  for (int32_t i = 0; i < options.num_streams; ++i) {
    cudaStream_t s = nullptr;
    INFLIGHT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    streams_.push_back(s);
    cudaEvent_t e = nullptr;
    INFLIGHT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    stream_marks_.push_back(e);
  }
  stream_ = streams_.front();
  INFLIGHT_CUDA_CHECK(cudaEventCreateWithFlags(&step_copied_, cudaEventDisableTiming));
  for (cudaEvent_t& e : upload_copied_) {
    INFLIGHT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  for (int i = 0; i < 2; ++i) {
    INFLIGHT_CUDA_CHECK(cudaEventCreate(&step_begin_[i]));
    INFLIGHT_CUDA_CHECK(cudaEventCreate(&step_end_[i]));
  }
  cudaDeviceProp prop{};
  INFLIGHT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  fp8_ = prop.major * 10 + prop.minor >= 89;
  allocator_ = CudaAllocator::create(device);
  gemm_workspace_ = allocator_->allocate(kGemmWorkspaceBytes);
  top_k_workspace_ = allocator_->allocate(kTopKLogitsCudaWorkspaceBytes);
  INFLIGHT_CUDA_CHECK(
      cudaMemsetAsync(top_k_workspace_.get(), 0, kTopKLogitsCudaWorkspaceBytes, stream_));
  gemm_ = std::make_unique<CublasLtGemm>(gemm_workspace_.get(), kGemmWorkspaceBytes,
                                         options_.batch_invariant);
}

CudaBackend::~CudaBackend() {
  // Nothing may throw here: errors are ignored, the stream is drained before anything it may
  // still use is released.
  abort_capture();
  for (cudaStream_t s : streams_) cudaStreamSynchronize(s);
  gemm_.reset();
  for (cudaEvent_t e : upload_copied_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  for (int i = 0; i < 2; ++i) {
    if (step_begin_[i] != nullptr) cudaEventDestroy(step_begin_[i]);
    if (step_end_[i] != nullptr) cudaEventDestroy(step_end_[i]);
  }
  if (step_copied_ != nullptr) cudaEventDestroy(step_copied_);
  for (cudaEvent_t e : stream_marks_) cudaEventDestroy(e);
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
}

void CudaBackend::on_stream_change(int32_t index) {
  check_not_capturing("set_stream");
  stream_ = streams_[static_cast<size_t>(index)];
}

void CudaBackend::join_stream(int32_t waiter, int32_t signaller) {
  const auto n = static_cast<int32_t>(streams_.size());
  INFLIGHT_CHECK_CODE(waiter >= 0 && waiter < n && signaller >= 0 && signaller < n,
                      ErrorCode::kInvalidArgument,
                      "cuda backend: join_stream({}, {}) of {} streams", waiter, signaller, n);
  if (waiter == signaller) return;
  bind();
  cudaEvent_t mark = stream_marks_[static_cast<size_t>(signaller)];
  INFLIGHT_CUDA_CHECK(cudaEventRecord(mark, streams_[static_cast<size_t>(signaller)]));
  INFLIGHT_CUDA_CHECK(cudaStreamWaitEvent(streams_[static_cast<size_t>(waiter)], mark, 0));
}

void CudaBackend::check_not_capturing(const char* what) const {
  INFLIGHT_CHECK(!capturing_, "cuda backend: {} while capturing a graph", what);
}

void CudaBackend::bind() const {
  // Kernels launch on the calling thread's current device: the engine thread is not the one
  // that made the backend. Cheap when the device is already current.
  INFLIGHT_CUDA_CHECK(cudaSetDevice(device_));
}

Tensor CudaBackend::alloc(const Shape& shape, DType dtype) {
  check_not_capturing("alloc");
  bind();
  int64_t numel = 1;
  for (const int64_t d : shape) {
    INFLIGHT_CHECK_CODE(d >= 0, ErrorCode::kInvalidArgument, "cuda alloc: bad shape {}",
                        shape_str(shape));
    numel *= d;
  }
  std::shared_ptr<void> owner =
      allocator_->allocate(static_cast<size_t>(numel) * dtype_size(dtype));
  void* data = owner.get();
  return Tensor::wrap(data, shape, dtype, device(), std::move(owner));
}

Tensor CudaBackend::upload(const Tensor& host_f32, DType dtype) {
  INFLIGHT_CHECK_CODE(
      host_f32.defined() && host_f32.device() == Device::kCpu && host_f32.dtype() == DType::kF32,
      ErrorCode::kInvalidArgument, "cuda upload: expected a host f32 tensor");
  INFLIGHT_CHECK_CODE(is_float(dtype), ErrorCode::kUnsupported,
                      "cuda upload: cannot convert f32 to {}", dtype_name(dtype));
  check_not_capturing("upload");
  Tensor dst = alloc(host_f32.shape(), dtype);
  const size_t esize = dtype_size(dtype);
  const int64_t numel = host_f32.numel();
  const auto chunk = static_cast<int64_t>(kUploadChunkBytes / esize);
  const auto* src = host_f32.data<float>();
  auto* out = static_cast<char*>(dst.raw());
  for (int64_t begin = 0, i = 0; begin < numel; begin += chunk, ++i) {
    const int64_t n = std::min(chunk, numel - begin);
    PinnedBuffer& staging = upload_staging_[i % 2];
    cudaEvent_t copied = upload_copied_[i % 2];
    INFLIGHT_CUDA_CHECK(cudaEventSynchronize(copied));  // this half's previous copy is done
    staging.reserve(kUploadChunkBytes);
    convert_from_f32(src + begin, staging.data(), dtype, n);
    INFLIGHT_CUDA_CHECK(cudaMemcpyAsync(out + begin * esize, staging.data(),
                                        static_cast<size_t>(n) * esize, cudaMemcpyHostToDevice,
                                        stream_));
    INFLIGHT_CUDA_CHECK(cudaEventRecord(copied, stream_));
  }
  return dst;
}

void CudaBackend::load_weight(const StoredTensor& w, const Tensor& dst) {
  INFLIGHT_CHECK_CODE(dst.defined() && dst.device() == device() && dst.numel() == w.numel() &&
                          (is_float(dst.dtype()) || dst.dtype() == DType::kF8E4M3),
                      ErrorCode::kInvalidArgument,
                      "cuda load_weight: '{}' {} does not fit a float destination of {} elements",
                      w.name, shape_str(w.shape), dst.defined() ? dst.numel() : 0);
  check_not_capturing("load_weight");
  bind();
  // Whole rows per chunk: each is converted on the host into one staging half while the
  // other half's copy runs.
  const int64_t out_row = w.cols() * static_cast<int64_t>(dtype_size(dst.dtype()));
  const int64_t rows_per_chunk =
      std::max<int64_t>(1, static_cast<int64_t>(kUploadChunkBytes) / std::max<int64_t>(out_row, 1));
  auto* out = static_cast<char*>(dst.raw());
  for (int64_t begin = 0, i = 0; begin < w.rows(); begin += rows_per_chunk, ++i) {
    const int64_t end = std::min(w.rows(), begin + rows_per_chunk);
    const auto bytes = static_cast<size_t>((end - begin) * out_row);
    PinnedBuffer& staging = upload_staging_[i % 2];
    cudaEvent_t copied = upload_copied_[i % 2];
    INFLIGHT_CUDA_CHECK(cudaEventSynchronize(copied));  // this half's previous copy is done
    staging.reserve(std::max(bytes, kUploadChunkBytes));
    convert_rows(w, begin, end, dst.dtype(), staging.data());
    INFLIGHT_CUDA_CHECK(cudaMemcpyAsync(out + begin * out_row, staging.data(), bytes,
                                        cudaMemcpyHostToDevice, stream_));
    INFLIGHT_CUDA_CHECK(cudaEventRecord(copied, stream_));
  }
}

size_t CudaBackend::stage_download(const Tensor& src) {
  check_not_capturing("download");
  const size_t bytes = src.nbytes();
  size_t offset = (download_used_ + 63) / 64 * 64;
  if (offset + bytes > download_staging_.capacity()) {
    // Growing frees the old buffer: drain the copies that target it first.
    if (!pending_.empty()) synchronize();
    offset = 0;
    download_staging_.reserve(std::max(bytes, 2 * download_staging_.capacity()));
  }
  INFLIGHT_CUDA_CHECK(cudaMemcpyAsync(download_staging_.data() + offset, src.raw(), bytes,
                                      cudaMemcpyDeviceToHost, stream_));
  download_used_ = offset + bytes;
  return offset;
}

void CudaBackend::download_f32(const Tensor& src, const Tensor& dst) {
  INFLIGHT_CHECK_CODE(src.defined() && src.device() == device() && is_float(src.dtype()),
                      ErrorCode::kInvalidArgument,
                      "cuda download: src must be a float tensor on the device");
  INFLIGHT_CHECK_CODE(dst.defined() && dst.device() == Device::kCpu && dst.dtype() == DType::kF32 &&
                          dst.shape() == src.shape(),
                      ErrorCode::kInvalidArgument,
                      "cuda download: dst must be a host f32 tensor of shape {}",
                      shape_str(src.shape()));
  if (src.nbytes() == 0) return;
  const size_t offset = stage_download(src);
  pending_.push_back(PendingDownload{offset, dst, src.dtype(), src.numel(), false});
}

void CudaBackend::download(const Tensor& src, const Tensor& dst) {
  INFLIGHT_CHECK_CODE(src.defined() && src.device() == device() && dst.defined() &&
                          dst.device() == Device::kCpu && dst.dtype() == src.dtype() &&
                          dst.shape() == src.shape(),
                      ErrorCode::kInvalidArgument,
                      "cuda download: dst must be a host tensor of src's dtype and shape {}",
                      shape_str(src.shape()));
  if (src.nbytes() == 0) return;
  const size_t offset = stage_download(src);
  pending_.push_back(PendingDownload{offset, dst, src.dtype(), src.numel(), true});
}

void CudaBackend::synchronize() {
  check_not_capturing("synchronize");
  for (cudaStream_t s : streams_) INFLIGHT_CUDA_CHECK(cudaStreamSynchronize(s));
  for (const PendingDownload& d : pending_) {
    if (d.raw) {
      std::memcpy(d.dst.raw(), download_staging_.data() + d.offset, d.dst.nbytes());
    } else {
      convert_to_f32(download_staging_.data() + d.offset, d.src_dtype, d.dst.data<float>(),
                     d.numel);
    }
  }
  pending_.clear();
  download_used_ = 0;
}

void CudaBackend::copy(const Tensor& src, const Tensor& dst) {
  INFLIGHT_CHECK_CODE(
      src.defined() && dst.defined() && src.device() == device() && dst.device() == device() &&
          src.dtype() == dst.dtype() && src.shape() == dst.shape(),
      ErrorCode::kInvalidArgument,
      "cuda copy: src and dst must be device tensors of one dtype and shape ({} {})",
      dtype_name(src.dtype()), shape_str(src.shape()));
  if (src.nbytes() == 0 || src.raw() == dst.raw()) return;
  INFLIGHT_CUDA_CHECK(
      cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::mark_step_begin() {
  check_not_capturing("mark_step_begin");
  INFLIGHT_CUDA_CHECK(cudaEventRecord(step_begin_[steps_marked_ % 2], stream_));
}

void CudaBackend::mark_step_end() {
  check_not_capturing("mark_step_end");
  INFLIGHT_CUDA_CHECK(cudaEventRecord(step_end_[steps_marked_ % 2], stream_));
  ++steps_marked_;
}

std::optional<Backend::StepTime> CudaBackend::last_step_time() const {
  if (steps_marked_ == 0) return std::nullopt;
  const int64_t cur = (steps_marked_ - 1) % 2;
  float busy_ms = 0.0f;
  if (cudaEventElapsedTime(&busy_ms, step_begin_[cur], step_end_[cur]) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;  // not both recorded and completed yet
  }
  StepTime t;
  t.busy_s = busy_ms * 1e-3;
  float idle_ms = 0.0f;
  if (steps_marked_ >= 2 &&
      cudaEventElapsedTime(&idle_ms, step_end_[1 - cur], step_begin_[cur]) == cudaSuccess) {
    t.idle_before_s = idle_ms * 1e-3;
  }
  cudaGetLastError();
  return t;
}

MemoryInfo CudaBackend::memory_info() const {
  bind();
  size_t free = 0, total = 0;
  INFLIGHT_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  MemoryInfo info;
  info.total = static_cast<int64_t>(total);
  info.free = static_cast<int64_t>(free);
  info.allocated = static_cast<int64_t>(allocator_->bytes_in_use());
  return info;
}

void CudaBackend::begin_capture() {
  check_not_capturing("begin_capture");
  INFLIGHT_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
}

std::unique_ptr<BackendGraph> CudaBackend::end_capture() {
  INFLIGHT_CHECK(capturing_, "cuda backend: end_capture without begin_capture");
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  INFLIGHT_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  INFLIGHT_CUDA_CHECK(err);
  return std::make_unique<CudaGraph>(exec);
}

void CudaBackend::abort_capture() noexcept {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr) {
    cudaGraphDestroy(graph);
  }
  cudaGetLastError();  // an invalidated capture leaves a sticky launch error behind
}

void CudaBackend::replay(const BackendGraph& graph) {
  check_not_capturing("replay");
  INFLIGHT_CUDA_CHECK(cudaGraphLaunch(static_cast<const CudaGraph&>(graph).exec(), stream_));
}

StepInputs CudaBackend::upload_batch(const ForwardBatch& batch) {
  check_not_capturing("upload_batch");
  bind();
  const StepInputLayout layout = StepInputLayout::of(batch);
  // The previous step's copy may still be reading the staging buffer.
  INFLIGHT_CUDA_CHECK(cudaEventSynchronize(step_copied_));
  step_staging_.reserve(layout.total_bytes);
  layout.pack(batch, step_staging_.data());
  if (!step_buffer_.defined() || static_cast<size_t>(step_buffer_.numel()) < layout.total_bytes) {
    const auto capacity = static_cast<int64_t>((layout.total_bytes + 4095) / 4096 * 4096);
    step_buffer_ = alloc({capacity}, DType::kU8);
  }
  INFLIGHT_CUDA_CHECK(cudaMemcpyAsync(step_buffer_.raw(), step_staging_.data(), layout.total_bytes,
                                      cudaMemcpyHostToDevice, stream_));
  INFLIGHT_CUDA_CHECK(cudaEventRecord(step_copied_, stream_));
  return layout.views(batch, step_buffer_.raw(), device(), step_buffer_.owner());
}

void CudaBackend::gather_rows(const Tensor& src, const Tensor& indices, const Tensor& dst,
                              int64_t first_index) {
  gather_rows_cuda(make_gather_rows_params(src, indices, dst, first_index), stream_);
}

void CudaBackend::rms_norm(const Tensor* add, const Tensor& residual, const Tensor& weight,
                           float eps, const Tensor& out) {
  rms_norm_cuda(make_rms_norm_params(add, residual, weight, eps, out), stream_);
}

void CudaBackend::gemm(const Tensor& x, const Linear& w, const Tensor& y) {
  w.require_unscaled(name());
  gemm_->run(make_gemm_params(x, w.weight, w.bias_or_null(), y), stream_);
}

void CudaBackend::gemm_gelu(const Tensor& x, const Linear& w, const Tensor& y) {
  w.require_unscaled(name());
  INFLIGHT_CHECK_CODE(y.dtype() == DType::kBF16, ErrorCode::kUnsupported,
                      "cuda gemm_gelu: bf16 output only, got {}", dtype_name(y.dtype()));
  gemm_->run(make_gemm_params(x, w.weight, w.bias_or_null(), y), stream_, GemmEpilogue::kGelu);
}

void CudaBackend::rope_kv_write(const Tensor& qkv, const StepInputs& in, const Tensor& inv_freq,
                                const Tensor& q_out, const KvCacheLayer& kv) {
  rope_kv_write_cuda(
      make_rope_kv_write_params(qkv, in.positions, in.slot_mapping, inv_freq, q_out, kv), stream_);
}

void CudaBackend::paged_attention(const Tensor& q, const KvCacheLayer& kv, const StepInputs& in,
                                  float scale, int32_t sliding_window, const Tensor* alibi_slopes,
                                  const Tensor& out) {
  paged_attention_cuda(
      make_paged_attention_params(q, kv, in.block_tables, in.query_start, in.context_lens,
                                  in.max_context_len, sliding_window, scale, alibi_slopes, out),
      stream_);
}

void CudaBackend::swiglu(const Tensor& gate_up, const Tensor& out) {
  swiglu_cuda(make_swiglu_params(gate_up, out), stream_);
}

namespace {

// Points a fused kernel's quantized output (RmsNormParams, SwigluParams) at q, checked as
// quantize_fp8's would be for `out`; out itself is scratch then (Backend::rms_norm_quantized).
template <typename Params>
void attach_quantized(Params& p, const Tensor& out, const QuantizedActivations& q) {
  const QuantizeFp8Params qp = make_quantize_fp8_params(out, nullptr, 0, q.values, q.scales);
  p.q_values = qp.values;
  p.q_scales = qp.scales;
  p.skip_out = true;
}

}  // namespace

// The fused kernels quantize per row with dynamic scales (ops/fp8_rows.cuh); other activation
// scales take the two passes.
void CudaBackend::rms_norm_quantized(const Tensor* add, const Tensor& residual,
                                     const Tensor& weight, float eps, const Tensor& out,
                                     const Linear& w, const QuantizedActivations& q) {
  if (w.activations != Linear::ActivationScales::kDynamicToken) {
    Backend::rms_norm_quantized(add, residual, weight, eps, out, w, q);
    return;
  }
  RmsNormParams p = make_rms_norm_params(add, residual, weight, eps, out);
  attach_quantized(p, out, q);
  rms_norm_cuda(p, stream_);
}

void CudaBackend::swiglu_quantized(const Tensor& gate_up, const Tensor& out, const Linear& w,
                                   const QuantizedActivations& q) {
  if (w.activations != Linear::ActivationScales::kDynamicToken) {
    Backend::swiglu_quantized(gate_up, out, w, q);
    return;
  }
  SwigluParams p = make_swiglu_params(gate_up, out);
  attach_quantized(p, out, q);
  swiglu_cuda(p, stream_);
}

void CudaBackend::layer_norm(const Tensor* add, const Tensor& residual, const Tensor& weight,
                             const Tensor* bias, float eps, const Tensor& out) {
  layer_norm_cuda(make_layer_norm_params(add, residual, weight, bias, eps, out), stream_);
}

void CudaBackend::gelu(const Tensor& x, const Tensor& out) {
  gelu_cuda(make_gelu_params(x, out), stream_);
}

void CudaBackend::clamp(const Tensor& x, float limit) {
  clamp_cuda(make_clamp_params(x, limit), stream_);
}

void CudaBackend::qk_norm(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads,
                          const Tensor& q_weight, const Tensor& k_weight, float eps) {
  INFLIGHT_CHECK_CODE(qkv.defined() && qkv.device() == device(), ErrorCode::kInvalidArgument,
                      "cuda qk_norm: expected device tensors");
  qk_norm_cuda(make_qk_norm_params(qkv, num_heads, num_kv_heads, q_weight, k_weight, eps), stream_);
}

void CudaBackend::moe_route(const Tensor& logits, int32_t k, bool renormalize, const Tensor& ids,
                            const Tensor& weights) {
  INFLIGHT_CHECK_CODE(logits.defined() && logits.device() == device(), ErrorCode::kInvalidArgument,
                      "cuda moe_route: expected device tensors");
  moe_route_cuda(make_moe_route_params(logits, k, renormalize, ids, weights), stream_);
}

void CudaBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                              const Linear& gate_up, const Linear& down, const MoeWorkspace& ws,
                              const Tensor& out) {
  INFLIGHT_CHECK_CODE(x.defined() && x.device() == device(), ErrorCode::kInvalidArgument,
                      "cuda moe_experts: expected device tensors");
  moe_experts_cuda(make_moe_experts_params(x, ids, weights, gate_up, down, ws, out), stream_,
                   options_.batch_invariant);
}

void CudaBackend::quantize_fp8(const Tensor& x, const Tensor* static_scale, int64_t group,
                               const Tensor& values, const Tensor& scales) {
  quantize_fp8_cuda(make_quantize_fp8_params(x, static_scale, group, values, scales), stream_);
}

void CudaBackend::gemm(const QuantizedActivations& x, const Linear& w, const Tensor& y) {
  gemm_->run(make_scaled_gemm_params(x, w, y), stream_);
}

// cuBLASLt's e4m3 kernel with per-token x per-channel scales (CublasLtGemm's outer vectors, the
// scales of dynamic per-token activations) runs 128-row tiles and takes a partial one at the
// price of 1.4-1.6 whole ones: on H100, Llama-3.1-8B's four layers at 129 rows 190 us, at 256
// rows 134 (dev/cuda/gemm/README.md run 12). Past one tile, whole tiles then.
int64_t CudaBackend::gemm_padded_rows(const Linear& w, int64_t rows) const {
  constexpr int64_t kTileRows = 128;
  if (options_.batch_invariant || w.activations != Linear::ActivationScales::kDynamicToken ||
      w.block_cols != 0 || rows <= kTileRows) {
    return rows;
  }
  return (rows + kTileRows - 1) / kTileRows * kTileRows;
}

void CudaBackend::fill_random(const Tensor& t, uint64_t seed, float scale, float offset,
                              const RandomWindow& w) {
  INFLIGHT_CHECK_CODE(t.defined() && t.device() == device(), ErrorCode::kInvalidArgument,
                      "cuda fill_random: expected a device tensor");
  fill_random_cuda(make_fill_random_params(t, seed, scale, offset, w.first, w.cols, w.whole_cols),
                   stream_);
}

void CudaBackend::top_k_logits(const Tensor& logits, int32_t k, const Tensor& log_sum_exp,
                               const Tensor& top_ids, const Tensor& top_logits) {
  INFLIGHT_CHECK_CODE(logits.defined() && logits.device() == device(), ErrorCode::kInvalidArgument,
                      "cuda top_k_logits: expected device tensors");
  top_k_logits_cuda(make_top_k_logits_params(logits, k, log_sum_exp, top_ids, top_logits),
                    top_k_workspace_.get(), stream_);
}

void CudaBackend::apply_token_bitmask(const Tensor& logits, const Tensor& rows,
                                      const Tensor& bitmask) {
  INFLIGHT_CHECK_CODE(logits.defined() && logits.device() == device() && rows.defined() &&
                          rows.device() == Device::kCpu && bitmask.defined() &&
                          bitmask.device() == Device::kCpu,
                      ErrorCode::kInvalidArgument,
                      "cuda apply_token_bitmask: expected device logits and host rows and masks");
  check_not_capturing("apply_token_bitmask");
  bind();
  if (rows.numel() == 0) return;
  auto grow = [&](Tensor& t, int64_t numel) {
    if (!t.defined() || t.numel() < numel) t = alloc({numel}, DType::kI32);
    return t.rows(0, numel);
  };
  Tensor rows_dev = grow(mask_rows_, rows.numel()).reshape(rows.shape());
  Tensor bits_dev = grow(mask_bits_, bitmask.numel()).reshape(bitmask.shape());
  INFLIGHT_CUDA_CHECK(
      cudaMemcpyAsync(rows_dev.raw(), rows.raw(), rows.nbytes(), cudaMemcpyHostToDevice, stream_));
  INFLIGHT_CUDA_CHECK(cudaMemcpyAsync(bits_dev.raw(), bitmask.raw(), bitmask.nbytes(),
                                      cudaMemcpyHostToDevice, stream_));
  token_bitmask_cuda(make_token_bitmask_params(logits, rows_dev, bits_dev), stream_);
}

void CudaBackend::mask_vocab_padding(const Tensor& logits, int64_t begin) {
  INFLIGHT_CHECK_CODE(logits.defined() && logits.device() == device(), ErrorCode::kInvalidArgument,
                      "cuda mask_vocab_padding: expected device logits");
  vocab_padding_mask_cuda(make_vocab_padding_mask_params(logits, begin), stream_);
}

}  // namespace

bool cuda_device_available() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it, so that it does not surface at the next launch check
    return false;
  }
  return count > 0;
}

std::string cuda_device_description(int device) {
  check_device_index(device);
  cudaDeviceProp prop{};
  INFLIGHT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  INFLIGHT_CUDA_CHECK(cudaDriverGetVersion(&driver));
  INFLIGHT_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB, driver {}.{}, runtime {}.{}, cuBLASLt {})",
                     prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                     static_cast<double>(prop.totalGlobalMem) / (1 << 30), driver / 1000,
                     driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10, cublasLtGetVersion());
}

std::unique_ptr<Backend> make_cuda_backend(int device, const CudaBackendOptions& options) {
  return std::make_unique<CudaBackend>(device, options);
}

}  // namespace inflight
