// `inflight eval`: next-token accuracy of quantized configurations of a model against the model
// as stored (docs/quantization.md, "Accuracy").
//
//   inflight eval [--model PATH] [--device auto|cpu|cuda[:N]] [--text FILE] [--context 512]
//                 [--max-windows N] [--modes fp8-tensor,fp8-channel,fp8-block]
//                 [--result-json FILE]
//
// The reference is the model dequantised to the backend's compute dtype (f32 on the CPU, bf16
// on CUDA); each mode (eval/eval_mode.h: base | fp8-tensor | fp8-channel | fp8-block, with
// +kv-<dtype>) is loaded beside it on the same backend. Prints perplexity, mean and max
// KL(reference || mode) and top-1 agreement per mode.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>

#include "bench/report.h"
#include "bench/run_info.h"
#include "core/check.h"
#include "eval/accuracy_eval.h"
#include "eval/eval_report.h"
#include "formats/default_model.h"
#include "tools/command.h"

namespace inflight::tools {
namespace {

// The committed evaluation text (bench/eval/README.md).
constexpr const char* kDefaultText = "bench/eval/alice_ch1-2.txt";

struct Options {
  std::string model;
  std::string device = "auto";
  std::string text;
  int32_t context = 512;
  int32_t max_windows = 0;
  std::string modes = "fp8-tensor,fp8-channel,fp8-block";
  std::string result_json;
};
Options opts;

// kDefaultText under the current directory or the checkout the binary was built in
// (build/bin/inflight: ../..).
std::string find_default_text() {
  namespace fs = std::filesystem;
  std::vector<fs::path> roots = {fs::current_path()};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) roots.push_back(exe.parent_path() / ".." / "..");
  std::string tried;
  for (const fs::path& root : roots) {
    const fs::path p = root / kDefaultText;
    if (fs::exists(p)) return fs::weakly_canonical(p).string();
    tried += "\n  " + p.string();
  }
  INFLIGHT_THROW(ErrorCode::kNotFound, "no --text given and {} was not found; looked at:{}",
                 kDefaultText, tried);
}

void setup(CLI::App& app) {
  app.add_option("--model", opts.model,
                 "GGUF file or Hugging Face directory, unquantized (default: the default model)");
  app.add_option("--device", opts.device, "auto | cpu | cuda | cuda:N")->capture_default_str();
  app.add_option("--text", opts.text,
                 std::string("UTF-8 text to score (default: ") + kDefaultText + ")");
  app.add_option("--context", opts.context, "Tokens per window, one prefill each")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--max-windows", opts.max_windows, "At most this many windows (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--modes", opts.modes,
                 "Comma-separated configurations compared with the reference: base | "
                 "fp8-tensor | fp8-channel | fp8-block, each optionally +kv-auto | +kv-bf16 | "
                 "+kv-fp8 (e.g. fp8-block+kv-fp8)")
      ->capture_default_str();
  app.add_option("--result-json", opts.result_json, "Write the result JSON here");
}

int run() {
  eval::EvalOptions o;
  o.model = opts.model.empty() ? find_default_model() : opts.model;
  o.device = opts.device;
  o.text = opts.text.empty() ? find_default_text() : opts.text;
  o.context = opts.context;
  o.max_windows = opts.max_windows;
  o.modes = eval::parse_eval_modes(opts.modes);
  // What ran, recorded before the run: the tree may change while a long evaluation goes on.
  const bench::RunInfo info = bench::collect_run_info();
  const eval::EvalResult result = eval::run_accuracy_eval(o, [](std::string_view line) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  });
  const std::string table = eval::format_table(result);
  std::fwrite(table.data(), 1, table.size(), stdout);
  if (!opts.result_json.empty()) {
    nlohmann::json j = eval::to_json(result);
    bench::add_run_info(j, info);
    bench::write_json_file(opts.result_json, j);
    std::fprintf(stderr, "wrote %s\n", opts.result_json.c_str());
  }
  return 0;
}

const bool kRegistered = register_command(
    {"eval", "Perplexity and KL divergence of quantized modes against the model as stored", &setup,
     &run});

}  // namespace
}  // namespace inflight::tools
