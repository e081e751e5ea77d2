// `inflight serve`: the OpenAI-, TGI- and KServe v2-compatible HTTP server, and KServe v2 over
// gRPC (Triton's GRPCInferenceService) on --grpc-port.
//
//   inflight serve [--model PATH | --model-repository DIR [--model-control-mode none|explicit]
//                   [--load-model NAME]...] [--host 127.0.0.1] [--port 8000] [--grpc-port PORT + 1]
//                  [--api-key KEY]
//                  [--allowed-hosts a,b] [--allowed-origins https://app.example] ...
//                  [--served-model-name NAME] [--max-model-len N] [--max-num-seqs N]
//                  [--max-num-batched-tokens N] [--kv-cache-memory auto|512MiB|0.9]
//                  [--chat-template FILE] [--device auto|cpu|cuda[:N]]
//                  [--quantization fp8|fp8-channel|fp8-tensor|fp8-block]
//                  [--dummy-weights --arch llama-3.1-8b --tokenizer FILE] ...
//
// The socket is bound first (GET /health answers 503 while the model loads), then the model
// is loaded on a second thread and published. With --model-repository every model of the
// repository (frontend/model_repository.h) is an engine of its own, its memory share planned
// at start; --model-control-mode explicit loads only the --load-model ones at start and lets
// /v2/repository/models/{m}/load|unload load and unload the others (Triton's modes). SIGINT/SIGTERM
// stop accepting, let in-flight requests finish within --shutdown-timeout (a second signal: at
// once), then abort the rest (streams end with finish reason "abort") and exit 0. What the server
// guards against and what it leaves to a reverse proxy: docs/security.md.
#include <CLI/CLI.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "core/check.h"
#include "core/logging.h"
#include "formats/default_model.h"
#include "frontend/loaded_model.h"
#include "frontend/model_registry.h"
#include "frontend/model_repository.h"
#include "frontend/tool_calls.h"
#include "inflight/engine.h"
#include "server/grpc/grpc_server.h"
#include "server/host_check.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"
#include "tools/command.h"
#include "tools/engine_options.h"
#include "tools/parallel_launch.h"

namespace inflight::tools {
namespace {

namespace fs = std::filesystem;

struct Options {
  // The engine's flags (--model, --device, --max-num-seqs, ...: tools/engine_options.h).
  EngineOptions engine;
  // The model's other settings (--served-model-name, --chat-template, ...); the engine's that a
  // model may set for itself are copied in (spec_of_flags). With --model-repository, what each
  // model's inflight.json starts from.
  frontend::ModelSpec spec;
  std::string positional_model;  // `inflight serve MODEL`, as `vllm serve MODEL`
  std::string model_repository;
  std::string model_control_mode = "none";            // none | explicit
  std::vector<std::string> load_models;               // --load-model (explicit mode)
  std::string tool_call_parser;                       // --tool-call-parser (tool_calls.h)
  std::string chat_content_special_tokens = "parse";  // parse | text
  bool disable_prefix_caching = false;
  std::optional<uint64_t> seed;
  std::string log_level;
  bool trust_remote_code = false;
  bool strict = false;
  bool disable_access_log = false;
  bool disable_log_stats = false;
  server::ServerConfig server;
  int grpc_port = -1;              // 0: no gRPC endpoint; -1: the HTTP port + 1 (8001)
  CLI::Option* api_key = nullptr;  // to tell "--api-key ''" from no --api-key
};
Options opts;

// --chat-template: a file, or the template text itself (as vLLM accepts).
std::string read_chat_template(const std::string& arg) {
  if (fs::exists(arg)) {
    std::ifstream in(arg, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  INFLIGHT_CHECK_CODE(arg.find("{{") != std::string::npos || arg.find("{%") != std::string::npos,
                      ErrorCode::kNotFound, "--chat-template: no such file '{}'", arg);
  return arg;
}

// --dtype (vLLM's): the compute dtype is the backend's, bfloat16 on GPUs and float32 on the
// CPU; naming another is an error rather than a silent difference.
void check_dtype(const std::string& dtype, const std::string& device) {
  if (dtype == "auto") return;
  const bool gpu = device.rfind("cuda", 0) == 0;
  const std::string computes = gpu ? "bfloat16" : "float32";
  const bool same = dtype == computes || (gpu && dtype == "bf16") || (!gpu && dtype == "float");
  INFLIGHT_CHECK_CODE(same, ErrorCode::kUnsupported,
                      "--dtype {}: {} computes in {} (FP8 weights: --quantization fp8); pass "
                      "--dtype auto or {}",
                      dtype, device, computes, computes);
}

// The engine's settings a model may set for itself (a repository's inflight.json: ModelSpec), each
// as the flag's member and the ModelSpec's.
constexpr auto kModelSettings = std::tuple{
    std::pair{&EngineOptions::model, &frontend::ModelSpec::model},
    std::pair{&EngineOptions::tokenizer, &frontend::ModelSpec::tokenizer},
    std::pair{&EngineOptions::device, &frontend::ModelSpec::device},
    std::pair{&EngineOptions::quantization, &frontend::ModelSpec::quantization},
    std::pair{&EngineOptions::kv_cache_dtype, &frontend::ModelSpec::kv_cache_dtype},
    std::pair{&EngineOptions::kv_cache_memory, &frontend::ModelSpec::kv_cache_memory},
    std::pair{&EngineOptions::max_model_len, &frontend::ModelSpec::max_model_len},
    std::pair{&EngineOptions::max_num_seqs, &frontend::ModelSpec::max_num_seqs},
    std::pair{&EngineOptions::max_num_batched_tokens, &frontend::ModelSpec::max_num_batched_tokens},
    std::pair{&EngineOptions::block_size, &frontend::ModelSpec::block_size}};

// f(flag member, spec member) for each of kModelSettings.
template <class F>
void for_each_model_setting(const F& f) {
  std::apply([&](const auto&... s) { (f(s.first, s.second), ...); }, kModelSettings);
}

// The model's settings as the flags give them: opts.spec with the engine's flags copied in.
frontend::ModelSpec spec_of_flags() {
  frontend::ModelSpec spec = opts.spec;
  for_each_model_setting([&](auto flag, auto setting) { spec.*setting = opts.engine.*flag; });
  return spec;
}

// The engine's flags with `spec`'s own settings in place of theirs.
EngineOptions engine_options(const frontend::ModelSpec& spec) {
  EngineOptions engine = opts.engine;
  for_each_model_setting([&](auto flag, auto setting) { engine.*flag = spec.*setting; });
  return engine;
}

ModelSource model_source(const frontend::ModelSpec& spec) {
  INFLIGHT_CHECK_CODE(!opts.engine.dummy_weights || !spec.tokenizer.empty(),
                      ErrorCode::kInvalidArgument,
                      "--dummy-weights needs --tokenizer FILE (e.g. a vocab GGUF of the same "
                      "vocabulary size) to serve text");
  return tools::model_source(engine_options(spec));
}

std::shared_ptr<const frontend::LoadedModel> load_model(const frontend::ModelSpec& spec) {
  const ModelSource source = model_source(spec);
  EngineConfig config = engine_config(engine_options(spec));
  config.enable_prefix_caching = spec.enable_prefix_caching && !opts.disable_prefix_caching;
  config.max_logprobs = spec.max_logprobs;
  config.gpu_memory_utilization = spec.gpu_memory_utilization;
  config.seed = opts.seed;
  auto engine = Engine::load(source, config);
  INFLIGHT_CHECK_CODE(engine.ok(), ErrorCode::kInvalidArgument, "cannot start the engine: {}",
                      engine.status().to_string());
  check_dtype(spec.dtype, engine.value()->device_name());

  const std::string tmpl =
      spec.chat_template.empty() ? std::string() : read_chat_template(spec.chat_template);
  auto model = frontend::make_loaded_model(std::move(engine).value(), tmpl);
  if (!model->chat_template) {
    INFLIGHT_LOG_WARN(
        "model '{}' has no chat template: its /v1/chat/completions will answer 400 "
        "(pass --chat-template)",
        spec.name);
  }
  model->limits.reject_unknown_fields = opts.strict;
  model->content_special_tokens_as_text = opts.chat_content_special_tokens == "text";
  return model;
}

// 1,000 concurrent streams need more descriptors than the usual soft limit of 1024.
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

void setup(CLI::App& app) {
  auto& http = opts.server.http;
  auto& server = opts.server.options;
  auto& front = opts.server.frontend;
  auto& spec = opts.spec;
  CLI::Option* model = add_engine_options(app, opts.engine);
  auto* positional =
      app.add_option("model_path", opts.positional_model,
                     "The model as a positional argument (as `vllm serve MODEL`); same as --model");
  auto* repository =
      app.add_option("--model-repository", opts.model_repository,
                     "Serve every model of this directory, one subdirectory per model with its "
                     "files and an optional inflight.json of settings (docs/model_repository.md)")
          ->excludes(model)
          ->excludes(positional);
  app.add_option("--model-control-mode", opts.model_control_mode,
                 "none: load every repository model at start; explicit: load the --load-model "
                 "ones, and others through /v2/repository/models/{m}/load|unload (Triton's)")
      ->check(CLI::IsMember({"none", "explicit"}))
      ->needs(repository)
      ->capture_default_str();
  app.add_option("--load-model", opts.load_models,
                 "With --model-control-mode explicit: a model to load at start (repeatable; '*' "
                 "= all)")
      ->needs(repository);
  app.add_option("--host", http.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", http.port, "Port to listen on (0 = any free port)")
      ->capture_default_str();
  app.add_option("--grpc-port", opts.grpc_port,
                 "Port of the KServe v2 gRPC endpoint, on the --host address (0 = off; default: "
                 "--port + 1, so 8001 beside 8000 as Triton, any free port with --port 0)")
      ->check(CLI::Range(-1, 65535));
  opts.api_key =
      app.add_option("--api-key", server.api_key,
                     "Require 'Authorization: Bearer KEY' on /v1/* and the generation routes");
  app.add_option("--allowed-hosts", http.allowed_hosts,
                 "Host header values served besides localhost, 127.0.0.1, [::1] and the --host "
                 "address (comma list; '*' = any). Checked always on a loopback --host, "
                 "elsewhere only when given")
      ->delimiter(',');
  app.add_option("--allowed-origins", http.allowed_origins,
                 "Browser origins allowed cross-origin access (CORS; comma list, '*' = any); "
                 "default: none, CORS off")
      ->delimiter(',');
  app.add_option("--served-model-name", spec.name,
                 "Model name in the API (default: the model file's name)");
  app.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", spec.enable_prefix_caching,
               "Reuse the KV blocks of cached prompt prefixes (vLLM's flag; on by default)");
  app.add_option("--gpu-memory-utilization", spec.gpu_memory_utilization,
                 "Share of the GPU's memory this server may use (weights + KV cache + workspace), "
                 "as vLLM's flag; the KV cache gets what is left of it. With --model-repository "
                 "the budget the models' shares split (default 0.9)")
      ->check(CLI::Range(0.0, 1.0).description("(0, 1]"));
  app.add_option("--dtype", spec.dtype,
                 "Compute dtype: auto (bfloat16 on GPUs, float32 on the CPU) or that dtype")
      ->capture_default_str();
  app.add_option("--seed", opts.seed,
                 "Seed of requests that set none (request i of the run draws from (seed, i))");
  app.add_option("--log-level", opts.log_level,
                 "Log level: debug | info | warning | error | critical (default: "
                 "INFLIGHT_LOG_LEVEL or info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warning", "error", "critical"}));
  app.add_flag("--disable-log-requests,--disable-uvicorn-access-log", opts.disable_access_log,
               "No access log line per request");
  app.add_flag("--disable-log-stats", opts.disable_log_stats,
               "No periodic engine line (throughput, running / waiting, KV cache usage)");
  app.add_option("--log-stats-interval", server.log_stats_interval_s,
                 "Seconds between engine lines")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--strict", opts.strict,
               "Answer 400 to request fields this server does not support (default: log each "
               "such field name once and go on)");
  app.add_flag("--trust-remote-code", opts.trust_remote_code,
               "Accepted for vLLM command lines; no checkpoint code is ever run");
  app.add_flag("--disable-prefix-caching", opts.disable_prefix_caching,
               "Do not reuse the KV blocks of shared prompt prefixes");
  app.add_option("--max-logprobs", spec.max_logprobs, "Largest logprobs / top_logprobs allowed")
      ->capture_default_str();
  app.add_option("--chat-template", spec.chat_template,
                 "Jinja chat template file (or text) replacing the model's");
  app.add_option("--chat-content-special-tokens", opts.chat_content_special_tokens,
                 "Special-token text inside chat messages ('<|im_end|>'): parse (as Hugging "
                 "Face's apply_chat_template does) or text (tokenized literally, so users cannot "
                 "forge role boundaries; the template's own markers stay special)")
      ->check(CLI::IsMember({"parse", "text"}))
      ->capture_default_str();
  app.add_option("--max-concurrent-requests", front.max_concurrent_requests,
                 "Generation requests in flight; more get 429")
      ->capture_default_str();
  app.add_option("--tool-call-parser", opts.tool_call_parser,
                 "Parse tool calls out of chat outputs of requests with tools: hermes "
                 "(<tool_call> JSON blocks: Qwen2.5/3, Hermes, Granite), llama3_json (Llama "
                 "3.x JSON), mistral ([TOOL_CALLS]), qwen3_coder (<function=...> XML: "
                 "Qwen3-Coder), seed_oss (the same in <seed:tool_call>), glm45 or glm47 "
                 "(<arg_key>/<arg_value>: GLM-4.5 to 4.7), kimi_k2, deepseek_v3 (V3, R1), "
                 "deepseek_v31 (their special-token sections) or pythonic ([f(a=1)]: Llama "
                 "3.2/4 pythonic, LFM2); default: the format the model's chat template renders, "
                 "if it is one of these")
      ->check(CLI::IsMember(frontend::tool_call_parser_name_list()));
  app.add_option("--metrics-prefix", server.metrics_prefix,
                 "Prefix of /metrics names ('inflight:' for vLLM's colon style, which promtool's "
                 "linter rejects)")
      ->capture_default_str();
  app.add_option("--http-threads", http.num_threads, "HTTP I/O threads")->capture_default_str();
  app.add_option("--max-body-bytes", http.max_body_bytes, "Largest request body; more get 413")
      ->capture_default_str();
  app.add_option("--read-timeout", http.read_timeout_s,
                 "Seconds a client has to send a whole request")
      ->capture_default_str();
  app.add_option("--idle-timeout", http.idle_timeout_s,
                 "Seconds an idle keep-alive connection is kept")
      ->capture_default_str();
  app.add_option("--shutdown-timeout", http.shutdown_timeout_s,
                 "Seconds in-flight requests may run on after SIGINT/SIGTERM")
      ->capture_default_str();
}

// Refuses an empty --api-key (it would silently mean "no key") and warns about a server that
// anyone who can reach the port may use.
void check_access() {
  const auto& server = opts.server.options;
  INFLIGHT_CHECK_CODE(opts.api_key->count() == 0 || !server.api_key.empty(),
                      ErrorCode::kInvalidArgument,
                      "--api-key is empty: give a key, or leave the option out to serve without "
                      "one");
  if (server.api_key.empty() && !server::is_loopback_host(opts.server.http.host)) {
    INFLIGHT_LOG_WARN(
        "listening on {} without --api-key: anyone who can reach this port can "
        "use the server (see docs/security.md)",
        opts.server.http.host);
  }
}

// The model named positionally or by --model (not two different ones).
std::string model_argument() {
  const std::string& model = opts.engine.model;
  INFLIGHT_CHECK_CODE(
      opts.positional_model.empty() || model.empty() || opts.positional_model == model,
      ErrorCode::kInvalidArgument, "two models given: '{}' (positional) and --model '{}'; give one",
      opts.positional_model, model);
  return model.empty() ? opts.positional_model : model;
}

// What a server serves: its models' specs (the registry's order), those loaded at start, and
// how a model is (re)built by name.
struct ServedModels {
  std::vector<frontend::ModelSpec> specs;
  std::vector<std::string> load_at_start;
  frontend::ModelRegistry::Loader loader;
  frontend::ModelRegistry::Source source;  // set for a repository the registry follows
};

// --model (or the default model, or dummy weights): one model, loaded at start.
ServedModels single_model() {
  frontend::ModelSpec spec = spec_of_flags();
  const std::string named = model_argument();
  const EngineOptions& e = opts.engine;
  spec.model = e.dummy_weights ? std::string() : named.empty() ? find_default_model() : named;
  if (spec.name.empty()) {
    spec.name = e.dummy_weights ? (e.arch.empty() ? std::string("dummy") : e.arch)
                                : fs::path(spec.model).filename().replace_extension().string();
  }
  ServedModels out;
  out.specs = {spec};
  out.load_at_start = {spec.name};
  out.loader = [spec](const std::string&) { return load_model(spec); };
  return out;
}

// A model repository's models (frontend::ModelRepository). With --model-control-mode none every
// model must read cleanly at start, with explicit only the --load-model ones (the others show
// their error when loaded). The registry follows the directory: models added later can be
// loaded, and a load of a loaded model whose files changed reloads it from them.
ServedModels repository_models() {
  INFLIGHT_CHECK_CODE(!opts.engine.dummy_weights && opts.engine.tensor_parallel_size == 1 &&
                          opts.engine.pipeline_parallel_size == 1,
                      ErrorCode::kUnsupported,
                      "--model-repository serves models of one GPU each: leave out "
                      "--dummy-weights, --tensor-parallel-size and --pipeline-parallel-size");
  const bool explicit_control = opts.model_control_mode == "explicit";
  INFLIGHT_CHECK_CODE(explicit_control || opts.load_models.empty(), ErrorCode::kInvalidArgument,
                      "--load-model needs --model-control-mode explicit (mode none loads every "
                      "model)");
  if (!opts.spec.name.empty()) {
    INFLIGHT_LOG_WARN(
        "--served-model-name {} is not used with --model-repository: each model is named by its "
        "directory or its inflight.json's served_model_name",
        opts.spec.name);
  }
  frontend::ModelSpec defaults = spec_of_flags();
  defaults.gpu_memory_utilization = 0.0;  // the flag is the budget here, not a model's share
  const double budget = opts.spec.gpu_memory_utilization > 0 ? opts.spec.gpu_memory_utilization
                                                             : EngineConfig::kAutoKvCacheFraction;
  auto repo = std::make_shared<frontend::ModelRepository>(opts.model_repository, defaults, budget);
  const bool load_all =
      !explicit_control ||
      std::find(opts.load_models.begin(), opts.load_models.end(), "*") != opts.load_models.end();
  ServedModels out;
  for (const frontend::RepositoryModel& m : repo->initial()) {
    const bool wanted = load_all || std::find(opts.load_models.begin(), opts.load_models.end(),
                                              m.name) != opts.load_models.end();
    if (!m.error.empty()) {
      INFLIGHT_CHECK_CODE(!wanted, ErrorCode::kInvalidArgument, "{}", m.error);
      INFLIGHT_LOG_WARN("model '{}' cannot be loaded as it is: {}", m.name, m.error);
    }
    frontend::ModelSpec spec;
    spec.name = m.name;
    spec.aliases = m.aliases;
    out.specs.push_back(spec);
    if (load_all) out.load_at_start.push_back(m.name);
  }
  if (!load_all) {
    for (const std::string& name : opts.load_models) {
      const auto& initial = repo->initial();
      INFLIGHT_CHECK_CODE(std::any_of(initial.begin(), initial.end(),
                                      [&](const auto& m) { return m.name == name; }),
                          ErrorCode::kNotFound, "--load-model {}: no such model in {}", name,
                          opts.model_repository);
      out.load_at_start.push_back(name);
    }
  }
  out.loader = [repo](const std::string& name) {
    auto model = load_model(repo->spec_to_load(name));
    repo->loaded(name);
    return model;
  };
  out.source.models = [repo] {
    std::vector<frontend::ModelRegistry::Names> names;
    for (auto& m : repo->scan()) names.push_back({std::move(m.name), std::move(m.aliases)});
    return names;
  };
  out.source.changed = [repo](const std::string& name) { return repo->changed(name); };
  return out;
}

int run() {
  if (!opts.log_level.empty()) spdlog::set_level(spdlog::level::from_str(opts.log_level));
  if (opts.trust_remote_code) {
    INFLIGHT_LOG_INFO("--trust-remote-code has no effect: no code from a checkpoint is ever run");
  }
  check_access();
  raise_fd_limit();
  opts.server.http.access_log = !opts.disable_access_log;
  if (opts.disable_log_stats) opts.server.options.log_stats_interval_s = 0;
  const bool repository = !opts.model_repository.empty();
  ServedModels served = repository ? repository_models() : single_model();
  if (!repository) {
    if (const std::optional<int> rc = start_parallel_job(model_source(served.specs[0]))) {
      return *rc;
    }
  }
  opts.server.options.explicit_model_control = opts.model_control_mode == "explicit";
  if (!opts.tool_call_parser.empty()) {
    opts.server.frontend.tool_call_parser = frontend::tool_call_parser_named(opts.tool_call_parser);
  }
  frontend::ModelRegistry registry(opts.server.frontend, served.loader);
  std::vector<std::string> names;
  for (const auto& spec : served.specs) {
    registry.add(spec.name, spec.aliases);
    names.push_back(spec.name);
  }
  if (served.source.models) registry.set_source(served.source);
  server::Server server(opts.server, registry);
  server.listen();
  std::optional<server::GrpcServer> grpc;
  if (opts.grpc_port != 0) {
    // The default follows the HTTP port (gRPC's own port 0 means any free port; 0 here is off).
    const int http_port = opts.server.http.port;
    const int port = opts.grpc_port > 0 ? opts.grpc_port : http_port == 0 ? 0 : http_port + 1;
    INFLIGHT_CHECK_CODE(port <= 65535, ErrorCode::kInvalidArgument,
                        "--port {} leaves no port for gRPC above it: give --grpc-port", http_port);
    grpc.emplace(server::GrpcServerConfig{opts.server.http.host, port, opts.server.options.api_key,
                                          opts.server.http.max_body_bytes,
                                          opts.server.options.explicit_model_control},
                 registry);
    grpc->start();
    // The HTTP drain and the gRPC one run side by side, with the same deadline.
    server.on_stop(
        [&grpc, timeout = opts.server.http.shutdown_timeout_s] { grpc->shutdown(timeout); });
  }
  INFLIGHT_LOG_INFO("serving {} on http://{}:{} (loading {})", fmt::join(names, ", "),
                    opts.server.http.host, server.port(),
                    served.load_at_start.empty()
                        ? std::string("none")
                        : fmt::format("{}", fmt::join(served.load_at_start, ", ")));
  // Tests and scripts that pass --port 0 read the port from this line.
  std::printf("inflight serve: listening on %s:%d\n", opts.server.http.host.c_str(), server.port());
  if (grpc) {
    std::printf("inflight serve: grpc on %s:%d\n", opts.server.http.host.c_str(), grpc->port());
  }
  std::fflush(stdout);

  std::string load_error;
  std::thread loader([&] {
    for (const std::string& name : served.load_at_start) {
      if (const Status s = registry.load(name); !s.ok()) {
        // A model that cannot start at start-up stops the server (Triton's --exit-on-error).
        load_error = std::string(s.message());
        server.stop();
        return;
      }
      INFLIGHT_LOG_INFO("model '{}' loaded, ready", name);
    }
    registry.set_started();
  });
  server.run();
  grpc.reset();  // waits for the gRPC calls (cancelled at the shutdown deadline)
  loader.join();
  if (!load_error.empty()) {
    std::fprintf(stderr, "error: %s\n", load_error.c_str());
    return 1;
  }
  INFLIGHT_LOG_INFO("server stopped");
  return 0;
}

const bool kRegistered =
    register_command({"serve", "Serve the OpenAI- and TGI-compatible HTTP API", &setup, &run});

}  // namespace
}  // namespace inflight::tools
