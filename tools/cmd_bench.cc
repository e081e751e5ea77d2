// `inflight bench serve | offline | latency | roofline`: serving benchmark against any
// OpenAI-compatible server (HTTP only), the engine's offline throughput and fixed-batch latency
// in-process, and the device's measured copy bandwidth and matrix rate with a model's floors.
// Methodology and result fields: docs/benchmarks.md, bench/results.schema.json.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/collectives_bench.h"
#include "bench/datasets.h"
#include "bench/defaults.h"
#include "bench/input_file.h"
#include "bench/latency_bench.h"
#include "bench/metrics.h"
#include "bench/offline_bench.h"
#include "bench/report.h"
#include "bench/roofline.h"
#include "bench/serve_bench.h"
#include "bench/token_codec.h"
#include "core/check.h"
#include "formats/default_model.h"
#include "formats/model_files.h"
#include "model/arch_presets.h"
#include "tools/command.h"
#include "tools/engine_options.h"
#include "tools/parallel_launch.h"

namespace inflight::tools {
namespace {

using namespace inflight::bench;  // NOLINT: this file is the bench front end

struct ServeArgs {
  ServeBenchOptions options;
  std::string endpoint = "/v1/completions";
  std::string backend = "openai";
  std::string dataset = "random";
  std::string dataset_path;
  int32_t num_prompts = 1000;
  std::string request_rate = "inf";
  RandomDatasetOptions random;
  int32_t prompts_output_len = 0;
  std::string goodput;
  std::string percentiles = "50,90,99";
  std::string result_json;
  bool save_detailed = false;
  bool no_progress = false;
  std::string tokenizer;
  std::string device;
  double ready_timeout = 600.0;
};

// bench offline and latency: the engine's options (tools/engine_options.h), and the report's.
struct EngineArgs {
  EngineOptions options;
  std::string percentiles = "50,90,99";
  std::string result_json;
};

ServeArgs g_serve;
EngineArgs g_engine;
OfflineBenchOptions g_offline;
LatencyBenchOptions g_latency;
CLI::App* g_serve_app = nullptr;
CLI::App* g_offline_app = nullptr;
CLI::App* g_latency_app = nullptr;
CLI::App* g_roofline_app = nullptr;

struct RooflineArgs {
  RooflineOptions options;
  std::string arch;
  std::string model;
  std::string result_json;
};
RooflineArgs g_roofline;

struct CollectivesArgs {
  CollectivesOptions options;
  int32_t ranks = 2;
  std::vector<std::string> sizes;
  std::string result_json;
};
CollectivesArgs g_collectives;
CLI::App* g_collectives_app = nullptr;

// The engine's options, then the workload's and the report's.
void add_engine_bench_options(CLI::App& app, int32_t& input_len, int32_t& output_len,
                              uint64_t& seed) {
  add_engine_options(app, g_engine.options);
  app.add_option("--input-len", input_len, "Prompt tokens per request")->capture_default_str();
  app.add_option("--output-len", output_len, "Generated tokens per request")->capture_default_str();
  app.add_option("--seed", seed, "Seed of the random prompts")->capture_default_str();
  app.add_option("--percentiles", g_engine.percentiles, "Percentiles to report")
      ->capture_default_str();
  app.add_option("--result-json", g_engine.result_json, "Write the result JSON here");
}

void setup(CLI::App& bench) {
  bench.require_subcommand(1);
  auto& s = g_serve;
  CLI::App* serve =
      bench.add_subcommand("serve", "Benchmark a server over OpenAI HTTP or KServe gRPC");
  g_serve_app = serve;
  serve->add_option("--base-url", s.options.base_url, "Server URL")->capture_default_str();
  serve->add_option("--endpoint", s.endpoint, "/v1/completions or /v1/chat/completions")
      ->capture_default_str();
  serve
      ->add_option("--backend", s.backend,
                   "openai (SSE over HTTP) or kserve-grpc (KServe v2 ModelStreamInfer over "
                   "gRPC at --grpc-url; --base-url still answers the readiness probe)")
      ->check(CLI::IsMember({"openai", "kserve-grpc"}))
      ->capture_default_str();
  serve->add_option("--grpc-url", s.options.grpc_target, "host:port of the KServe gRPC endpoint")
      ->capture_default_str();
  serve->add_option("--model", s.options.model,
                    "Model name to send (default: the first one "
                    "GET /v1/models lists)");
  serve->add_option("--dataset", s.dataset, "random | prompts")
      ->check(CLI::IsMember({"random", "prompts"}))
      ->capture_default_str();
  serve->add_option("--dataset-path", s.dataset_path,
                    "ShareGPT-shaped JSON (.json or .json.xz) for --dataset prompts");
  serve->add_option("--prompts-output-len", s.prompts_output_len,
                    "prompts: fixed output length instead of the reply's length");
  serve->add_option("--num-prompts", s.num_prompts, "Requests to send")->capture_default_str();
  serve->add_option("--request-rate", s.request_rate, "Requests per second, or inf")
      ->capture_default_str();
  serve
      ->add_option("--burstiness", s.options.burstiness,
                   "Gamma shape of the arrival gaps (1 = Poisson)")
      ->capture_default_str();
  serve
      ->add_option("--max-concurrency", s.options.max_concurrency,
                   "Most requests in flight (0 = no cap)")
      ->capture_default_str();
  serve->add_option("--random-input-len", s.random.input_len)->capture_default_str();
  serve->add_option("--random-output-len", s.random.output_len)->capture_default_str();
  serve->add_option("--random-range-ratio", s.random.range_ratio)->capture_default_str();
  serve->add_option("--random-prefix-len", s.random.prefix_len)->capture_default_str();
  serve->add_flag("--ignore-eos", s.options.ignore_eos, "Ask the server to ignore EOS");
  serve->add_option("--seed", s.options.seed)->capture_default_str();
  serve->add_option("--goodput", s.goodput, "SLOs in ms, e.g. ttft:500,tpot:50,e2el:3000");
  serve->add_option("--percentiles", s.percentiles)->capture_default_str();
  serve->add_option("--result-json", s.result_json, "Write the result JSON here");
  serve->add_flag("--save-detailed", s.save_detailed, "Per-request arrays in the JSON");
  serve->add_option("--api-key", s.options.api_key, "Bearer token");
  serve->add_option("--tokenizer", s.tokenizer,
                    "Tokenizer for building and counting prompts "
                    "(default: the default model's GGUF)");
  serve->add_option("--num-warmups", s.options.num_warmups, "Uncounted requests first")
      ->capture_default_str();
  serve->add_option("--device", s.device, "Device label for the result (default: detected)");
  serve->add_flag("--no-progress", s.no_progress, "No progress bar");
  serve
      ->add_option("--ready-timeout", s.ready_timeout,
                   "Seconds to wait for the server to come up (503 or connection refused)")
      ->capture_default_str();

  g_offline_app = bench.add_subcommand("offline", "Engine throughput, all requests queued at once");
  add_engine_bench_options(*g_offline_app, g_offline.input_len, g_offline.output_len,
                           g_offline.seed);
  g_offline_app->add_option("--num-prompts", g_offline.num_prompts)->capture_default_str();
  g_offline_app->add_option("--json-schema", g_offline.json_schema,
                            "Constrain every output with this JSON schema (structured output): "
                            "its JSON text, or @FILE");

  g_latency_app = bench.add_subcommand("latency", "TTFT and decode step latency of a fixed batch");
  add_engine_bench_options(*g_latency_app, g_latency.input_len, g_latency.output_len,
                           g_latency.seed);
  g_latency_app->add_option("--batch-size", g_latency.batch_size)->capture_default_str();
  g_latency_app->add_option("--num-iters", g_latency.num_iters)->capture_default_str();
  g_latency_app->add_option("--num-iters-warmup", g_latency.num_iters_warmup)
      ->capture_default_str();

  auto& r = g_roofline;
  g_roofline_app = bench.add_subcommand(
      "roofline", "Measured copy bandwidth and matrix rate, and a model's decode/prefill floors");
  g_roofline_app->add_option("--device", r.options.device, "auto | cpu | cuda | cuda:N")
      ->capture_default_str();
  g_roofline_app->add_option("--arch", r.arch, "Model shape for the floors (arch preset)");
  g_roofline_app->add_option("--model", r.model, "Model file or directory for the floors");
  g_roofline_app->add_option("--prefill-tokens", r.options.prefill_tokens)->capture_default_str();
  g_roofline_app->add_option("--repeats", r.options.repeats)->capture_default_str();
  g_roofline_app->add_option("--copy-bytes", r.options.copy_bytes,
                             "Copy buffer size (default: 2 GiB on a GPU, 256 MiB on the CPU)");
  g_roofline_app->add_option("--gemm-size", r.options.gemm_size,
                             "GEMM m = n = k (default: 8192 on a GPU, 1024 on the CPU)");
  g_roofline_app->add_option("--result-json", r.result_json, "Write the result JSON here");

  auto& c = g_collectives;
  g_collectives_app = bench.add_subcommand(
      "collectives", "All-reduce latency and bandwidth between the ranks of a job (NCCL on GPUs)");
  g_collectives_app->add_option("--ranks", c.ranks, "Ranks (one per GPU), started with mpirun")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  g_collectives_app->add_option("--device", c.options.device, "auto | cpu | cuda")
      ->capture_default_str();
  g_collectives_app
      ->add_option("--sizes", c.sizes, "Message sizes (8KiB, 1MiB, ...; default 8 KiB to 256 MiB)")
      ->delimiter(',');
  g_collectives_app->add_option("--iters", c.options.iters)->capture_default_str();
  g_collectives_app->add_option("--result-json", c.result_json, "Write the result JSON here");
}

double parse_rate(const std::string& text) {
  if (text == "inf") return std::numeric_limits<double>::infinity();
  size_t used = 0;
  double rate = 0.0;
  try {
    rate = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  INFLIGHT_CHECK_CODE(used == text.size() && rate > 0.0, ErrorCode::kInvalidArgument,
                      "--request-rate must be a positive number or inf, got '{}'", text);
  return rate;
}

int run_serve() {
  ServeArgs& a = g_serve;
  ServeBenchOptions& o = a.options;
  o.backend = a.backend == "kserve-grpc" ? ServeBackend::kKServeGrpc : ServeBackend::kOpenAI;
  o.endpoint_path = a.endpoint;
  o.endpoint = a.endpoint.find("chat/completions") != std::string::npos ? Endpoint::kChatCompletions
                                                                        : Endpoint::kCompletions;
  o.request_rate = parse_rate(a.request_rate);
  o.progress = !a.no_progress;
  ServeReportContext context;
  context.dataset_name = a.dataset;
  context.percentiles = parse_percentiles(a.percentiles);
  context.goodput = parse_goodput(a.goodput);
  context.save_detailed = a.save_detailed;
  context.tokenizer = a.tokenizer.empty() ? find_default_model() : a.tokenizer;
  const auto codec = load_token_codec(context.tokenizer);
  std::vector<BenchRequest> requests;
  if (a.dataset == "random") {
    a.random.num_prompts = a.num_prompts;
    a.random.seed = o.seed;
    requests = random_dataset(a.random, *codec);
  } else {
    const std::string path = a.dataset_path.empty() ? default_prompts_path() : a.dataset_path;
    PromptsDatasetOptions po;
    po.num_prompts = a.num_prompts;
    po.seed = o.seed;
    if (a.prompts_output_len > 0) po.fixed_output_len = a.prompts_output_len;
    requests = prompts_dataset(parse_sharegpt(read_input_file(path)), po, *codec);
  }
  const std::string listed = probe_server(o.base_url, o.api_key, a.ready_timeout);
  if (o.model.empty()) o.model = listed;
  INFLIGHT_CHECK_CODE(!o.model.empty(), ErrorCode::kInvalidArgument,
                      "{} lists no model at /v1/models: pass --model", o.base_url);
  std::fprintf(stderr,
               "bench serve: %zu requests to %s%s, model %s, rate %s, burstiness %g, "
               "max concurrency %d\n",
               requests.size(), o.base_url.c_str(), o.endpoint_path.c_str(), o.model.c_str(),
               a.request_rate.c_str(), o.burstiness, o.max_concurrency);
  const ServeBenchRun run = run_serve_bench(o, requests);
  const BenchmarkMetrics m = compute_metrics(
      run.records, run.duration, context.percentiles, context.goodput,
      [&](const std::string& text) { return static_cast<int32_t>(codec->encode(text).size()); });
  print_serve_table(stdout, m, run, o, context);
  std::fflush(stdout);
  if (!a.result_json.empty()) {
    write_json_file(a.result_json,
                    serve_result_json(m, run, o, context, collect_run_info(a.device)));
    std::fprintf(stderr, "wrote %s\n", a.result_json.c_str());
  }
  if (run.interrupted) return 130;
  return m.completed > 0 ? 0 : 1;
}

EngineSetupOptions engine_setup() {
  EngineSetupOptions e;
  e.source = model_source(g_engine.options);
  e.config = engine_config(g_engine.options);
  e.kv_cache_memory = g_engine.options.kv_cache_memory;
  return e;
}

void maybe_write(const nlohmann::json& result) {
  if (g_engine.result_json.empty()) return;
  write_json_file(g_engine.result_json, result);
  std::fprintf(stderr, "wrote %s\n", g_engine.result_json.c_str());
}

int run_offline() {
  g_offline.engine = engine_setup();
  if (const std::optional<int> rc = start_parallel_job(g_offline.engine.source)) return *rc;
  g_offline.percentiles = parse_percentiles(g_engine.percentiles);
  if (g_offline.json_schema.starts_with('@')) {
    std::ifstream in(g_offline.json_schema.substr(1));
    if (!in) {
      std::fprintf(stderr, "error: cannot read --json-schema file %s\n",
                   g_offline.json_schema.substr(1).c_str());
      return 2;
    }
    g_offline.json_schema.assign(std::istreambuf_iterator<char>(in), {});
  }
  const OfflineBenchResult r = run_offline_bench(g_offline);
  print_offline_table(stdout, r);
  std::fflush(stdout);
  maybe_write(offline_result_json(r, g_offline, collect_run_info()));
  return r.completed > 0 ? 0 : 1;
}

int run_latency() {
  g_latency.engine = engine_setup();
  if (const std::optional<int> rc = start_parallel_job(g_latency.engine.source)) return *rc;
  g_latency.percentiles = parse_percentiles(g_engine.percentiles);
  const LatencyBenchResult r = run_latency_bench(g_latency);
  print_latency_table(stdout, r, g_latency);
  std::fflush(stdout);
  maybe_write(latency_result_json(r, g_latency, collect_run_info()));
  return 0;
}

int run_roofline() {
  const RooflineArgs& a = g_roofline;
  std::optional<ModelConfig> model;
  if (!a.arch.empty()) {
    model = dummy_model_config(a.arch, "");
  } else if (!a.model.empty()) {
    model = ModelFiles::open(a.model)->config();
  }
  const Roofline r = measure_roofline(a.options);
  print_roofline(stdout, r, model, a.options);
  std::fflush(stdout);
  if (!a.result_json.empty()) {
    write_json_file(a.result_json, roofline_json(r, model, a.options, collect_run_info()));
    std::fprintf(stderr, "wrote %s\n", a.result_json.c_str());
  }
  return 0;
}

// "8KiB", "1MiB", "65536": bytes (the units of --kv-cache-memory).
int64_t parse_bytes(const std::string& text, const char* option) {
  EngineConfig c;
  const Status s = parse_kv_cache_memory(text, c);
  INFLIGHT_CHECK_CODE(s.ok() && c.kv_cache_bytes > 0, ErrorCode::kInvalidArgument,
                      "{}: '{}' is not a size in bytes (8KiB, 1MiB, 65536)", option, text);
  return c.kv_cache_bytes;
}

int run_collectives() {
  CollectivesArgs& c = g_collectives;
  for (const std::string& s : c.sizes) c.options.sizes.push_back(parse_bytes(s, "--sizes"));
  if (const std::optional<int> rc = launch_ranks(c.ranks)) return *rc;
  const CollectivesResult r = run_collectives_bench(c.options);
  if (Engine::join_parallel_job() != 0) return 0;  // rank 0 reports
  print_collectives_table(stdout, r);
  std::fflush(stdout);
  if (!c.result_json.empty()) {
    write_json_file(c.result_json, collectives_result_json(r, c.options, collect_run_info()));
  }
  return 0;
}

int run() {
  if (g_roofline_app->parsed()) return run_roofline();
  if (g_collectives_app->parsed()) return run_collectives();
  if (g_serve_app->parsed()) return run_serve();
  if (g_offline_app->parsed()) return run_offline();
  if (g_latency_app->parsed()) return run_latency();
  return 1;
}

const bool kRegistered = register_command(
    {"bench",
     "Benchmarks: serve (HTTP load), offline (throughput), latency (fixed batch), roofline, "
     "collectives",
     &setup, &run});

}  // namespace
}  // namespace inflight::tools
