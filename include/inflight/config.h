// EngineConfig: the knobs of one engine, fixed at Engine::create().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "inflight/status.h"

namespace inflight {

struct EngineConfig {
  // ---- KV cache --------------------------------------------------------------------------
  // Tokens per KV block (the page size of the paged cache). >= 1.
  int32_t block_size = 16;
  // Number of KV blocks; 0 = from kv_cache_memory_fraction or kv_cache_bytes.
  int64_t num_kv_blocks = 0;
  // When > 0 (and num_kv_blocks is 0): the KV cache takes this fraction of the device memory
  // that is free once the weights and the step workspace are allocated (less a small reserve
  // for the runtime). In (0, 1]; 0 = use kv_cache_bytes.
  double kv_cache_memory_fraction = 0.0;
  // KV cache memory when num_kv_blocks and kv_cache_memory_fraction are 0. 0 = automatic:
  // kAutoKvCacheFraction of the free memory of a GPU, kAutoKvCacheHostBytes of host memory.
  int64_t kv_cache_bytes = 0;
  static constexpr double kAutoKvCacheFraction = 0.9;
  // When > 0 (GPUs; vLLM's --gpu-memory-utilization): the share of the device's whole memory this
  // engine may use, weights, workspace and runtime reserve included; the KV cache gets the rest
  // of that share. In (0, 1]. Takes precedence over the KV cache settings above but
  // num_kv_blocks.
  double gpu_memory_utilization = 0.0;
  static constexpr int64_t kAutoKvCacheHostBytes = int64_t{512} << 20;
  // Reuse the KV blocks of the longest cached prompt prefix (full blocks, hashed by chain).
  bool enable_prefix_caching = true;

  // ---- scheduling ------------------------------------------------------------------------
  // Longest sequence (prompt + output) served; 0 = the model's max_position_embeddings.
  int32_t max_model_len = 0;
  // Most sequences in one step (a request with n choices counts n); 0 = from the memory plan:
  // 256 on the CPU; on a GPU as many as leave each about 256 tokens of the KV cache, between
  // 64 and 1024 (a batch the cache cannot hold would only be preempted).
  int32_t max_num_seqs = 0;
  // Most tokens computed in one step, over all sequences (prefill chunks + decodes); 0 = 2048
  // on the CPU, 8192 on a GPU.
  int32_t max_num_batched_tokens = 0;
  // Split prompts longer than the step's remaining budget over several steps. When off, a
  // request longer than max_num_batched_tokens is rejected.
  bool enable_chunked_prefill = true;
  // Most tokens one sequence computes per step (keeps decodes flowing beside long prompts);
  // 0 = no per-sequence cap.
  int32_t long_prefill_token_threshold = 0;
  // How much of the running sequences' remaining max_tokens admission keeps KV blocks free for
  // (the rule in engine/scheduler.cc): 1 = the default estimate, which starts at 100%, decays
  // while nothing is preempted towards the share of their max_tokens that finished requests
  // used (at least 10%) and returns to 100% after a preemption; scaled by this factor (as
  // SGLang's --schedule-conservativeness). 0 = optimistic admission (vLLM's: admit while
  // blocks are free, preempt and recompute when they run out). >= 0.
  double schedule_conservativeness = 1.0;
  // Most steps in flight at once under pipeline parallelism, each over its own sequences
  // (micro-batches: stage s computes one while stage s + 1 computes the one before), so that no
  // stage waits for the others; each takes at most 1 / max_num_micro_batches of the sequences
  // there are. 0 = one per pipeline stage; 1 = one step at a time (every stage but one idle).
  // At most the number of pipeline stages.
  int32_t max_num_micro_batches = 0;

  // ---- outputs ---------------------------------------------------------------------------
  // Upper bound on SamplingParams::logprobs.
  int32_t max_logprobs = 20;
  // Rows whose sampling needs only the best candidates (greedy, top-k, logprobs; no penalties)
  // come back from the device as candidates + log-sum-exp instead of whole rows. Off: every row
  // comes back whole (the reference path; same tokens).
  bool device_sampling = true;
  // The seed of requests that set none: request i (in enqueue order) draws from a seed derived
  // from (seed, i), so a run of the same requests in the same order repeats itself. Unset: a
  // random seed per request.
  std::optional<uint64_t> seed;

  // kInvalidArgument naming the field.
  Status validate() const;
};

// Sets the KV cache memory of `config` from text, as the tools' --kv-cache-memory takes it:
//   "auto"                       kv_cache_bytes = 0: a fraction kAutoKvCacheFraction of the
//                                free memory on a GPU, kAutoKvCacheHostBytes on the CPU
//   "0.9"                        a fraction in (0, 1] of the memory free after weights and
//                                workspace (device memory on a GPU, MemAvailable on the CPU)
//   "512MiB", "2G", "1073741824" bytes (binary units K/M/G, with or without "iB"/"B")
// kInvalidArgument naming the text when it is none of these.
Status parse_kv_cache_memory(std::string_view text, EngineConfig& config);

// What Engine::load builds an engine from: a model's files, or dummy weights of a known shape.
struct ModelSource {
  // A .gguf file or a Hugging Face directory (config.json, *.safetensors, tokenizer.json).
  std::string path;
  // Dummy weights made on the device instead (performance work; no tokenizer unless given):
  // an architecture preset ("llama-3.1-8b", ...) or a Hugging Face config.json.
  std::string dummy_arch;
  std::string dummy_config;
  uint64_t dummy_seed = 20261121;
  // A tokenizer other than the model's own (a GGUF file, tokenizer.json or its directory).
  std::string tokenizer;
  // auto (CUDA device 0 when there is one, else the CPU) | cpu | cuda | cuda:N
  std::string device = "auto";
  // "" (the checkpoint's own format: FP8 checkpoints are detected) | "fp8" (= "fp8-channel") |
  // "fp8-tensor" | "fp8-block": an unquantized checkpoint (or dummy weights) quantized while
  // loading to FP8 e4m3 linear layers with one scale per output channel (activations scaled per
  // token), per tensor (per token), or per 128 x 128 block (per token and 128 columns)
  // (docs/quantization.md). Ignored for a checkpoint that is already quantized.
  std::string quantization;
  // The KV cache's storage: "auto" (e4m3 when the checkpoint declares an FP8 KV cache, else the
  // compute dtype), "bf16" (the compute dtype) or "fp8" (e4m3 with a scale per token and kv
  // head, docs/quantization.md); "bfloat16" and "fp8_e4m3" are accepted as aliases.
  std::string kv_cache_dtype = "auto";
  // Tensor parallelism: the model split over this many ranks, one process per GPU (or per CPU
  // process), launched by mpirun (docs/deploy.md). Rank 0 calls Engine::load and serves; every
  // other rank calls Engine::run_worker with the same source.
  int32_t tensor_parallel_size = 1;
  // Pipeline parallelism: the layers split into this many stages, each of tensor_parallel_size
  // ranks (tensor_parallel_size x pipeline_parallel_size processes in all).
  int32_t pipeline_parallel_size = 1;
};

}  // namespace inflight
