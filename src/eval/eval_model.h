// EvalModel: one configuration of `inflight eval` on the backend: its model (weights quantized
// as the mode says) and a KV cache for one window, in the mode's KV dtype.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "eval/eval_mode.h"
#include "formats/model_files.h"
#include "runtime/backend.h"
#include "runtime/forward_batch.h"
#include "runtime/kv_cache.h"
#include "runtime/model.h"

namespace inflight::eval {

inline constexpr int32_t kEvalBlockSize = 16;

struct EvalModel {
  EvalMode mode;
  std::string description;       // "weights: ..., kv cache: ...", for the report
  std::shared_ptr<Model> model;  // shared with the reference when the mode is base (no copy)
  std::unique_ptr<KvCache> cache;
  double load_seconds = 0.0;

  // The f32 logits [window.size(), vocab] of one window run as a single prefill from position
  // 0, every row returned (host).
  Tensor forward(const std::vector<int32_t>& window);
};

// The model of `files` on `backend` as `mode` says, with a cache for windows of up to `context`
// tokens. `reference` (may be null) is reused for modes whose weights and KV cache dtype are the
// reference's.
// Throws Error(kInvalidArgument) when a mode asks for online FP8 of a checkpoint that is already
// quantized, Error(kUnsupported) for what the backend or this build cannot run.
EvalModel load_eval_model(const ModelFiles& files, Backend& backend, const EvalMode& mode,
                          const EvalModel* reference, int32_t context);

// Throws Error(kInvalidArgument) unless `kv_cache_dtype` is "auto", "bf16" or "fp8"; checked
// for every mode before any model is loaded.
void check_kv_cache_dtype(const Backend& backend, std::string_view kv_cache_dtype);

// Sets config's KV cache dtype as `kv_cache_dtype` says ("auto": the checkpoint's own; "bf16":
// the compute dtype; "fp8": e4m3 with a scale per token and kv head).
void apply_kv_cache_dtype(std::string_view kv_cache_dtype, ModelConfig& config);

// A KV cache of `num_blocks` x `block_size` for `model`, of the dtype its config says.
std::unique_ptr<KvCache> make_kv_cache(const Model& model, int64_t num_blocks, int32_t block_size);

// The ForwardBatch of one sequence computing `window` from position 0 in blocks 0, 1, ...,
// logits for every row.
ForwardBatch window_batch(const std::vector<int32_t>& window, int32_t block_size);

}  // namespace inflight::eval
