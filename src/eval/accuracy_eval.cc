#include "eval/accuracy_eval.h"

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "backend/backend_factory.h"
#include "core/check.h"
#include "eval/eval_model.h"
#include "eval/text_windows.h"
#include "formats/model_files.h"
#include "tokenizer/tokenizer.h"

namespace inflight::eval {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  INFLIGHT_CHECK_CODE(in.good(), ErrorCode::kNotFound, "cannot read the text file '{}'", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

EvalResult run_accuracy_eval(const EvalOptions& options,
                             const std::function<void(std::string_view)>& progress) {
  const auto begin = Clock::now();
  INFLIGHT_CHECK_CODE(!options.modes.empty(), ErrorCode::kInvalidArgument,
                      "--modes: name at least one mode to compare with the reference");
  EvalResult result;
  result.model = options.model;
  result.text = options.text;
  result.context = options.context;

  const std::unique_ptr<ModelFiles> files = ModelFiles::open(options.model);
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_path(files->tokenizer_path());
  const std::vector<int32_t> tokens =
      tokenizer->encode(read_text(options.text), /*add_special=*/false, /*parse_special=*/false);
  result.text_tokens = static_cast<int64_t>(tokens.size());
  result.bos = tokenizer->add_bos() && tokenizer->bos_id() >= 0;
  const std::vector<std::vector<int32_t>> windows = split_windows(
      tokens, options.context, options.max_windows, result.bos ? tokenizer->bos_id() : -1);
  result.num_windows = static_cast<int64_t>(windows.size());
  const int64_t max_positions = files->config().max_position_embeddings;
  INFLIGHT_CHECK_CODE(max_positions <= 0 || options.context <= max_positions,
                      ErrorCode::kInvalidArgument,
                      "--context {} exceeds the model's context length of {} tokens",
                      options.context, max_positions);

  std::unique_ptr<Backend> backend = make_backend(options.device);
  result.backend = backend->name();
  result.compute_dtype = dtype_name(backend->compute_dtype());
  for (const EvalMode& mode : options.modes) check_kv_cache_dtype(*backend, mode.kv_cache_dtype);
  // Every configuration stays loaded: each window runs through all of them in turn.
  EvalModel reference =
      load_eval_model(*files, *backend, EvalMode{"base", "", "auto"}, nullptr, options.context);
  std::vector<EvalModel> candidates;
  for (const EvalMode& mode : options.modes) {
    candidates.push_back(load_eval_model(*files, *backend, mode, &reference, options.context));
  }
  result.reference.mode = reference.mode;
  result.reference.description = reference.description;
  result.reference.load_seconds = reference.load_seconds;
  result.modes.resize(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    result.modes[i].mode = candidates[i].mode;
    result.modes[i].description = candidates[i].description;
    result.modes[i].load_seconds = candidates[i].load_seconds;
  }

  for (size_t w = 0; w < windows.size(); ++w) {
    const std::vector<int32_t>& window = windows[w];
    const std::span<const int32_t> targets(window.data() + 1, window.size() - 1);
    auto t = Clock::now();
    const ReferenceRows ref = prepare_reference(reference.forward(window));
    result.reference.metrics.merge(score_rows(ref, nullptr, targets, "base"));
    result.reference.run_seconds += seconds_since(t);
    std::string line = fmt::format("window {}/{}: base ppl {:.3f}", w + 1, windows.size(),
                                   result.reference.metrics.perplexity());
    for (size_t i = 0; i < candidates.size(); ++i) {
      t = Clock::now();
      const Tensor logits = candidates[i].forward(window);
      ModeResult& r = result.modes[i];
      r.metrics.merge(score_rows(ref, &logits, targets, r.mode.name));
      r.run_seconds += seconds_since(t);
      line += fmt::format(", {} ppl {:.3f} kl {:.5f}", r.mode.name, r.metrics.perplexity(),
                          r.metrics.mean_kl());
    }
    if (progress) progress(line);
  }
  result.seconds = seconds_since(begin);
  return result;
}

}  // namespace inflight::eval
