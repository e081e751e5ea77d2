// Backend: the device-neutral op set of one transformer step, on tensors that live on the
// backend's device. The model graph (model/llama.cc) is written against this interface only;
// backend/cpu implements it with the fp32 reference kernels of src/ops, backend/cuda with
// CUDA kernels and cuBLASLt.
//
// Execution model: every op is asynchronous with respect to the host (on CUDA: enqueued on the
// backend's stream). Ops validate their arguments' shapes, dtypes and devices on the host when
// called (ops/<op>.h make_<op>_params) and never read device memory to do it, so a whole step
// can run without a host sync and a decode step can be captured as a CUDA graph. The host sees
// results only after synchronize().
//
// Tensors are views (core/tensor.h): an op writes through a `const Tensor&` output argument.
// Shapes: T tokens in the step, S sequences, L logits rows, H query heads, KH kv heads,
// D head_dim; KV caches are [num_blocks, block_size, KH, D] (see ops/paged_kv.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "formats/stored_tensor.h"
#include "runtime/linear.h"
#include "runtime/moe_workspace.h"
#include "runtime/step_inputs.h"

namespace inflight {

struct KvCacheLayer;  // runtime/kv_cache.h
class Communicator;   // runtime/communicator.h

// Where a tensor lies in a larger row-major one, for fill_random: element (r, c) of the tensor
// (`cols` columns; 0: one row of all its elements) is element first + r * whole_cols + c of the
// whole.
struct RandomWindow {
  int64_t first = 0;
  int64_t cols = 0;
  int64_t whole_cols = 0;
};

// Device memory as the backend sees it (bytes).
struct MemoryInfo {
  int64_t total = 0;      // the device's memory (host RAM for the CPU backend)
  int64_t free = 0;       // what could still be allocated now (MemAvailable on the CPU)
  int64_t allocated = 0;  // held by this backend's tensors
  bool host = false;      // the device's memory is the host's (the CPU backend)
};

// A captured sequence of ops that the backend can launch again as one unit (a CUDA graph).
// Every launch reads and writes exactly the memory the ops touched during capture.
class BackendGraph {
 public:
  virtual ~BackendGraph() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  virtual Device device() const = 0;
  // The element type of weights, activations and the KV cache (f32 on CPU, bf16 on CUDA).
  virtual DType compute_dtype() const = 0;

  // ---- capabilities -------------------------------------------------------------------------
  // Whether ops return before the device ran them (CUDA). A synchronous backend (the CPU) has
  // done the work when an op returns, so a long step can be abandoned between layers.
  virtual bool asynchronous() const = 0;
  // Device memory the memory plan keeps free for the runtime (graphs, library kernels loaded
  // lazily, the driver's own allocations).
  virtual int64_t runtime_reserve() const { return 0; }

  // ---- memory -------------------------------------------------------------------------------
  // Uninitialised device memory, freed when the last view goes away.
  virtual Tensor alloc(const Shape& shape, DType dtype) = 0;
  // A device copy of a host f32 tensor, converted to `dtype`. The host tensor may be freed as
  // soon as this returns.
  virtual Tensor upload(const Tensor& host_f32, DType dtype) = 0;
  // Whether the backend runs FP8 (e4m3) GEMMs: quantize_fp8 and the scaled gemm below.
  virtual bool supports_fp8() const { return false; }
  // The weight-format policy: the dtype a stored weight is kept in on this device: e4m3 stays
  // e4m3 (with its scales) where FP8 runs, everything else (and e4m3 elsewhere, dequantised)
  // becomes the compute dtype: f32 on the CPU, bf16 on CUDA.
  virtual DType weight_dtype(const StoredTensor& w) const {
    return w.type == StoredType::kF8E4M3 && supports_fp8() ? DType::kF8E4M3 : compute_dtype();
  }
  // Writes the stored weight `w`, converted to dst's dtype, into dst: a device tensor (or a row
  // range of one, for fused weights) of w's element count. Conversion and staging happen on the
  // host before this returns, so `w`'s bytes may be released right after; the device copy may
  // still be in flight. Throws Error(kUnsupported) for a conversion the backend lacks.
  virtual void load_weight(const StoredTensor& w, const Tensor& dst) = 0;
  // Enqueues a copy of a device tensor into a host f32 tensor of the same shape, converting;
  // dst holds the values after synchronize().
  virtual void download_f32(const Tensor& src, const Tensor& dst) = 0;
  // Enqueues a bitwise copy of a device tensor into a host tensor of the same shape and dtype
  // (token ids, candidates); dst holds the values after synchronize().
  virtual void download(const Tensor& src, const Tensor& dst) = 0;
  // Enqueues dst = src, bit for bit: device tensors of the same shape and dtype.
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
  // Waits for every enqueued op.
  virtual void synchronize() = 0;
  virtual MemoryInfo memory_info() const = 0;

  // ---- streams ----------------------------------------------------------------------------
  // A backend owns num_streams() ordered queues of work (one on a synchronous backend); every
  // op, copy, graph launch and capture goes to the current stream, in order. Work on different
  // streams may run concurrently (pipeline micro-batches, communication beside compute) and is
  // ordered only by join_stream(). synchronize() waits for every stream.
  virtual int32_t num_streams() const { return 1; }
  int32_t current_stream() const { return current_stream_; }
  // Later work goes to stream `index`. Throws Error(kInvalidArgument) outside
  // [0, num_streams()), and while capturing a graph.
  void set_stream(int32_t index);
  // Work enqueued on `waiter` from now on starts after everything enqueued on `signaller` so far.
  virtual void join_stream(int32_t waiter, int32_t signaller) {}

  // ---- collectives (tensor and pipeline parallelism) --------------------------------------
  // The bootstrap id of a communicator among this device's peers: made on the group's first
  // rank, sent to the others by the launcher (MPI), and passed to make_communicator on each.
  // Empty when the backend has no device collectives (the CPU: ranks reduce host memory over
  // MPI instead).
  virtual std::vector<uint8_t> communicator_id() const { return {}; }
  // This rank's member of the group of `size` ranks that `id` names, enqueuing its collectives
  // in this backend's stream order (capturable in graphs).
  virtual std::unique_ptr<Communicator> make_communicator(int rank, int size,
                                                          const std::vector<uint8_t>& id);

  // ---- step timing (device timeline; backends without one return nothing) -----------------
  // mark_step_begin() before a step's first op, mark_step_end() after its last; after the
  // synchronize() that ends the step, last_step_time() gives how long the device worked on it
  // and how long it sat idle since the previous step's end (negative for the first step).
  struct StepTime {
    double busy_s = 0.0;
    double idle_before_s = -1.0;
  };
  virtual void mark_step_begin() {}
  virtual void mark_step_end() {}
  virtual std::optional<StepTime> last_step_time() const { return std::nullopt; }

  // ---- graphs (CUDA graphs; unsupported on the CPU) -------------------------------------------
  // Between begin_capture() and end_capture() ops are recorded, not run; replay() runs them.
  // NOTE: nothing may allocate, upload, download or synchronize while capturing; every tensor a
  // captured op touches must stay at its address for as long as the graph is replayed.
  virtual bool supports_graphs() const { return false; }
  virtual void begin_capture();
  virtual std::unique_ptr<BackendGraph> end_capture();
  // Ends a capture that failed half-way, dropping what was recorded. Never throws.
  virtual void abort_capture() noexcept {}
  virtual void replay(const BackendGraph& graph);

  // ---- step inputs --------------------------------------------------------------------------
  // The batch's arrays on the device, in one transfer. The batch must already be validated.
  virtual StepInputs upload_batch(const ForwardBatch& batch) = 0;

  // ---- ops (asynchronous; see ops/<op>.h for the exact semantics) ---------------------------
  // dst[i] = src[indices[i] - first_index]: src [R, C], indices [N] i32, dst [N, C]; a row
  // whose index falls outside [first_index, first_index + R) is zeros. Embedding lookup (of a
  // vocabulary shard under tensor parallelism) and the pick of logits rows.
  virtual void gather_rows(const Tensor& src, const Tensor& indices, const Tensor& dst,
                           int64_t first_index = 0) = 0;
  // residual += add (add may be null); out = rms_norm(residual) * weight. [R, C], weight [C].
  virtual void rms_norm(const Tensor* add, const Tensor& residual, const Tensor& weight, float eps,
                        const Tensor& out) = 0;
  // y = x w^T (+ bias): x [M, K], w.weight [N, K], w.bias [N] or undefined, y [M, N]
  // (runtime/linear.h). Throws Error(kUnsupported) for a weight format the backend lacks.
  virtual void gemm(const Tensor& x, const Linear& w, const Tensor& y) = 0;
  // y = gelu(x w^T (+ bias)), the exact GELU (MPT's up projection): gemm, then gelu in place, or
  // fused where the backend can (CUDA's GEMV applies it to each f32 sum before rounding).
  virtual void gemm_gelu(const Tensor& x, const Linear& w, const Tensor& y);
  // RoPE on q and k of qkv [T, (H + 2 KH) D] at in.positions: q -> q_out [T, H, D], rotated k
  // and v -> the layer's cache at in.slot_mapping (quantized with their scales for an e4m3
  // cache). inv_freq [D / 2] f32 on the device.
  virtual void rope_kv_write(const Tensor& qkv, const StepInputs& in, const Tensor& inv_freq,
                             const Tensor& q_out, const KvCacheLayer& kv) = 0;
  // Causal attention of q [T, H, D] over each sequence's cached context -> out [T, H, D].
  // sliding_window 0: unlimited. alibi_slopes [H] f32 (ALiBi: + slope_h * (key position - query
  // position) on the scaled scores) or null.
  virtual void paged_attention(const Tensor& q, const KvCacheLayer& kv, const StepInputs& in,
                               float scale, int32_t sliding_window, const Tensor* alibi_slopes,
                               const Tensor& out) = 0;
  // out = silu(gate) * up for gate_up [R, 2I] = [gate | up], out [R, I].
  virtual void swiglu(const Tensor& gate_up, const Tensor& out) = 0;
  // rms_norm, and swiglu, whose output goes into `q` quantized for the FP8 layer `w` that reads
  // it next (quantize_for below): in one pass where the backend fuses them (CUDA, for dynamic
  // per-token scales), else the op into `out` and then quantize_fp8. `out` is scratch: a fused
  // pass may leave it unwritten, so the caller reads q (and rms_norm's residual), never out.
  virtual void rms_norm_quantized(const Tensor* add, const Tensor& residual, const Tensor& weight,
                                  float eps, const Tensor& out, const Linear& w,
                                  const QuantizedActivations& q);
  virtual void swiglu_quantized(const Tensor& gate_up, const Tensor& out, const Linear& w,
                                const QuantizedActivations& q);
  // residual += add (add may be null); out = layer_norm(residual) * weight (+ bias, may be null).
  // [R, C], weight and bias [C] (MPT; ops/layer_norm.h).
  virtual void layer_norm(const Tensor* add, const Tensor& residual, const Tensor& weight,
                          const Tensor* bias, float eps, const Tensor& out) = 0;
  // out = gelu(x), the exact (erf) GELU: x and out [R, C] (MPT's MLP; ops/gelu.h).
  virtual void gelu(const Tensor& x, const Tensor& out) = 0;
  // x = clamp(x, -limit, limit) in place (MPT's clip_qkv; ops/clamp.h).
  virtual void clamp(const Tensor& x, float limit) = 0;
  // Per-head RMSNorm of the q and k heads of qkv [T, (H + 2 KH) D], in place, with q_weight and
  // k_weight [D] (Qwen3, before RoPE; ops/qk_norm.h).
  virtual void qk_norm(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads,
                       const Tensor& q_weight, const Tensor& k_weight, float eps) = 0;

  // ---- mixture of experts (ops/moe_route.h, ops/moe_experts.h) -----------------------------
  // Router logits [T, E] f32 -> each token's k best experts ids [T, k] i32 (best first, ties
  // by lower id) and their softmax weights [T, k] f32, renormalised over the k when asked.
  virtual void moe_route(const Tensor& logits, int32_t k, bool renormalize, const Tensor& ids,
                         const Tensor& weights) = 0;
  // out [T, hidden] = sum_j weights[t, j] * expert ids[t, j]'s SwiGLU MLP of x [T, hidden], with
  // the stacked weights gate_up [E, 2 I, hidden] and down [E, hidden, I] (the compute dtype, or
  // e4m3 with scales: weight-only FP8); `ws` is scratch of at least T k rows.
  virtual void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                           const Linear& gate_up, const Linear& down, const MoeWorkspace& ws,
                           const Tensor& out) = 0;

  // ---- FP8 (runtime/linear.h; backends without it throw Error(kUnsupported)) -----------------
  // x [M, K] -> e4m3 values [M, K] and f32 scales (ops/quantize_fp8.h): per row (group 0),
  // per group of `group` columns ([ceil(K / group), M]), or with the static scale [1]. Quantizes
  // activations for a scaled GEMM (quantize_for below) and weights at load (one scale per row).
  virtual void quantize_fp8(const Tensor& x, const Tensor* static_scale, int64_t group,
                            const Tensor& values, const Tensor& scales);
  // y = the scaled product of e4m3 activations and an e4m3 weight (ops/scaled_gemm.h): y of the
  // compute dtype or f32, w.bias of y's dtype.
  virtual void gemm(const QuantizedActivations& x, const Linear& w, const Tensor& y);
  // The rows that product of `rows` rows is best run on where the caller's buffers hold more
  // rows past them as scratch (computed from whatever they hold, never read): `rows`, unless
  // the backend's kernels pay for a partial tile as for a whole one or more.
  virtual int64_t gemm_padded_rows(const Linear& w, int64_t rows) const;
  // t[i] = offset + scale * u(seed, j(i)), u uniform in [-1, 1): the same values (before
  // rounding to the tensor's dtype) on every backend (ops/fill_random.h). Dummy weights. j(i) = i,
  // or with a window the index in a larger tensor that t is a block of: a tensor-parallel rank
  // fills its slice with the values the whole tensor would have there.
  virtual void fill_random(const Tensor& t, uint64_t seed, float scale, float offset,
                           const RandomWindow& window = {}) = 0;
  // Per row of f32 logits [L, V]: log-sum-exp [L] and the k best (id, logit) pairs, best first,
  // ties by lower id (ops/top_k_logits.h). What the sampler needs instead of whole rows.
  virtual void top_k_logits(const Tensor& logits, int32_t k, const Tensor& log_sum_exp,
                            const Tensor& top_ids, const Tensor& top_logits) = 0;
  // Structured output: logits [L, V] f32 on the device; `rows` [M] i32 and `bitmask` [M,
  // ceil(V / 32)] i32 on the host: logits[rows[m], v] = -inf where bit v of bitmask[m] is clear
  // (ops/token_bitmask.h). Enqueued: the host tensors must stay unchanged until synchronize().
  virtual void apply_token_bitmask(const Tensor& logits, const Tensor& rows,
                                   const Tensor& bitmask) = 0;
  // logits [L, C] f32 on the device: columns from `begin` on become -inf in every row, ids past
  // the tokenizer in a padded LM head (ops/vocab_padding_mask.h). Enqueued.
  virtual void mask_vocab_padding(const Tensor& logits, int64_t begin) = 0;

 protected:
  // set_stream() is about to make `index` current (backends with several streams).
  virtual void on_stream_change(int32_t /*index*/) {}

 private:
  int32_t current_stream_ = 0;
};

inline void Backend::set_stream(int32_t index) {
  INFLIGHT_CHECK_CODE(index >= 0 && index < num_streams(), ErrorCode::kInvalidArgument,
                      "{} backend: stream {} outside [0, {})", name(), index, num_streams());
  if (index != current_stream_) on_stream_change(index);
  current_stream_ = index;
}

inline void Backend::quantize_fp8(const Tensor&, const Tensor*, int64_t, const Tensor&,
                                  const Tensor&) {
  INFLIGHT_THROW(ErrorCode::kUnsupported, "{} backend: FP8 is not supported", name());
}
inline int64_t Backend::gemm_padded_rows(const Linear&, int64_t rows) const {
  return rows;
}
inline void Backend::gemm(const QuantizedActivations&, const Linear&, const Tensor&) {
  INFLIGHT_THROW(ErrorCode::kUnsupported, "{} backend: FP8 GEMMs are not supported", name());
}

// Quantizes x [M, K] as the scaled GEMM of `w` reads it (w.activations) into `out`, views of
// the right shapes (runtime/linear.h).
inline void quantize_for(Backend& backend, const Tensor& x, const Linear& w,
                         const QuantizedActivations& out) {
  using ActivationScales = Linear::ActivationScales;
  const bool is_static = w.activations == ActivationScales::kStaticTensor;
  const int64_t group = w.activations == ActivationScales::kDynamicGroup ? w.block_cols : 0;
  backend.quantize_fp8(x, is_static ? &w.input_scale : nullptr, group, out.values, out.scales);
}

inline void Backend::rms_norm_quantized(const Tensor* add, const Tensor& residual,
                                        const Tensor& weight, float eps, const Tensor& out,
                                        const Linear& w, const QuantizedActivations& q) {
  rms_norm(add, residual, weight, eps, out);
  quantize_for(*this, out, w, q);
}
inline void Backend::gemm_gelu(const Tensor& x, const Linear& w, const Tensor& y) {
  gemm(x, w, y);
  gelu(y, y);
}

inline void Backend::swiglu_quantized(const Tensor& gate_up, const Tensor& out, const Linear& w,
                                      const QuantizedActivations& q) {
  swiglu(gate_up, out);
  quantize_for(*this, out, w, q);
}

inline void Backend::begin_capture() {
  INFLIGHT_THROW(ErrorCode::kUnsupported, "{} backend: graphs are not supported", name());
}
inline std::unique_ptr<BackendGraph> Backend::end_capture() {
  INFLIGHT_THROW(ErrorCode::kUnsupported, "{} backend: graphs are not supported", name());
}
inline void Backend::replay(const BackendGraph&) {
  INFLIGHT_THROW(ErrorCode::kUnsupported, "{} backend: graphs are not supported", name());
}

}  // namespace inflight
