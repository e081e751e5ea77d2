// The accuracy evaluation of `inflight eval`: a reference model and candidate configurations of
// the same checkpoint on one backend, compared window by window on a fixed text
// (docs/quantization.md, "Accuracy").
//
//   tokenize the text -> windows (text_windows.h)
//   per window: reference prefill -> logits [context, vocab] -> log_sum_exp, argmax per row
//               each mode's prefill -> perplexity, KL(ref || mode), top-1 agreement
//               (next_token_metrics.h); only one window's logits live at a time
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/eval_mode.h"
#include "eval/next_token_metrics.h"

namespace inflight::eval {

struct EvalOptions {
  std::string model;  // a GGUF file or a Hugging Face directory
  std::string device = "auto";
  std::string text;         // a UTF-8 text file
  int32_t context = 512;    // tokens per window (one prefill)
  int32_t max_windows = 0;  // 0: every whole window of the text
  std::vector<EvalMode> modes;
};

struct ModeResult {
  EvalMode mode;
  std::string description;   // weights and KV cache, as loaded
  NextTokenMetrics metrics;  // the reference's own: KL 0, top-1 agreement 1
  double load_seconds = 0.0;
  double run_seconds = 0.0;  // prefills and scoring
};

struct EvalResult {
  std::string model;
  std::string backend;        // "cpu", "cuda:0"
  std::string compute_dtype;  // of the reference: f32 on the CPU, bf16 on CUDA
  std::string text;
  int64_t text_tokens = 0;
  int32_t context = 0;
  int64_t num_windows = 0;
  bool bos = false;  // each window starts with BOS (the tokenizer adds one)
  ModeResult reference;
  std::vector<ModeResult> modes;
  double seconds = 0.0;
};

// Runs the evaluation; `progress` (may be empty) receives one line per window. Throws Error
// with an actionable message for bad options, a missing file, or a mode the backend cannot run.
EvalResult run_accuracy_eval(const EvalOptions& options,
                             const std::function<void(std::string_view)>& progress);

}  // namespace inflight::eval
