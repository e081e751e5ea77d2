#include "eval/eval_report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace inflight::eval {
namespace {

nlohmann::json mode_json(const ModeResult& r) {
  const NextTokenMetrics& m = r.metrics;
  return {
      {"name", r.mode.name},
      {"quantization", r.mode.quantization.empty() ? "none" : r.mode.quantization},
      {"kv_cache_dtype", r.mode.kv_cache_dtype},
      {"description", r.description},
      {"tokens", m.num_tokens()},
      {"perplexity", m.perplexity()},
      {"mean_nll", m.mean_nll()},
      {"mean_kl", m.mean_kl()},
      {"max_kl", m.max_kl()},
      {"top1_agreement", m.top1_agreement()},
      {"load_seconds", r.load_seconds},
      {"run_seconds", r.run_seconds},
  };
}

}  // namespace

std::string format_table(const EvalResult& result) {
  std::string out = fmt::format(
      "{} on {}: {} ({} tokens), {} windows of {} tokens{}, {} scored tokens per mode\n\n",
      result.model, result.backend, result.text, result.text_tokens, result.num_windows,
      result.context, result.bos ? " (BOS first)" : "", result.reference.metrics.num_tokens());
  out += fmt::format("{:<22} {:>11} {:>9} {:>11} {:>10} {:>8}\n", "mode", "perplexity", "vs base",
                     "mean KL", "max KL", "top-1");
  const double base_ppl = result.reference.metrics.perplexity();
  auto row = [&](const std::string& name, const NextTokenMetrics& m, bool reference) {
    const std::string delta =
        reference ? "-" : fmt::format("{:+.2f}%", 100.0 * (m.perplexity() / base_ppl - 1.0));
    out += fmt::format("{:<22} {:>11.4f} {:>9} {:>11.5f} {:>10.4f} {:>7.2f}%\n", name,
                       m.perplexity(), delta, m.mean_kl(), m.max_kl(), 100.0 * m.top1_agreement());
  };
  row(fmt::format("base ({}, reference)", result.compute_dtype), result.reference.metrics, true);
  for (const ModeResult& r : result.modes) row(r.mode.name, r.metrics, false);
  out += "\n";
  for (const ModeResult& r : result.modes) {
    out += fmt::format("{}: {}\n", r.mode.name, r.description);
  }
  return out;
}

nlohmann::json to_json(const EvalResult& result) {
  nlohmann::json modes = nlohmann::json::array();
  for (const ModeResult& r : result.modes) modes.push_back(mode_json(r));
  return {
      {"mode", "eval"},
      {"model", result.model},
      {"backend", result.backend},
      {"compute_dtype", result.compute_dtype},
      {"text", result.text},
      {"text_tokens", result.text_tokens},
      {"context", result.context},
      {"windows", result.num_windows},
      {"bos", result.bos},
      {"tokens_per_mode", result.reference.metrics.num_tokens()},
      {"reference", mode_json(result.reference)},
      {"modes", modes},
      {"duration", result.seconds},
  };
}

}  // namespace inflight::eval
