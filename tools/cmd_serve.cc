// `inflight serve`: the OpenAI- and TGI-compatible HTTP server on the CPU backend.
//
//   inflight serve [--model PATH] [--host 127.0.0.1] [--port 8000] [--api-key KEY]
//                  [--served-model-name NAME] [--max-model-len N] [--max-num-seqs N]
//                  [--max-num-batched-tokens N] [--kv-cache-memory 512MiB|0.1]
//                  [--chat-template FILE] ...
//
// The socket is bound first (GET /health answers 503 while the model loads), then the model
// is loaded on a second thread and published. SIGINT/SIGTERM stop accepting, let in-flight
// requests finish within --shutdown-timeout, then abort the rest and exit 0.
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

#include "backend/cpu/cpu_backend.h"
#include "core/check.h"
#include "core/env.h"
#include "core/logging.h"
#include "engine/llama_runner.h"
#include "inflight/engine.h"
#include "model/model_files.h"
#include "server/server.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tools/command.h"

namespace inflight::tools {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDefaultModel = "SmolLM2-135M-Instruct.Q4_1.gguf";

struct Options {
  std::string model;
  std::string served_model_name;
  std::string chat_template;
  std::string kv_cache_memory = "512MiB";
  int32_t max_model_len = 0;
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t block_size = 16;
  int32_t max_logprobs = 20;
  bool disable_prefix_caching = false;
  server::ServerConfig server;
};
Options opts;

// models/<default> under $INFLIGHT_MODEL_DIR, the current directory, and the executable's
// ../models and ../../models (the same search as `inflight generate`).
std::string find_default_model() {
  std::vector<fs::path> dirs;
  if (!env().model_dir.empty()) dirs.emplace_back(env().model_dir);
  dirs.emplace_back(fs::current_path() / "models");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path() / ".." / "models");
    dirs.push_back(exe.parent_path() / ".." / ".." / "models");
  }
  std::string tried;
  for (const auto& d : dirs) {
    const fs::path p = d / kDefaultModel;
    if (fs::exists(p)) return fs::weakly_canonical(p).string();
    tried += "\n  " + p.string();
  }
  INFLIGHT_THROW(ErrorCode::kNotFound,
                 "no --model given and the default model was not found; looked at:{}\n"
                 "run scripts/fetch_model.sh or set INFLIGHT_MODEL_DIR",
                 tried);
}

// "536870912", "512MiB", "512M", "2GiB", "1.5G" (binary units), or a fraction in (0, 1] of
// the machine's physical memory ("0.1").
int64_t parse_memory(const std::string& text) {
  std::istringstream in(text);
  double value = 0;
  in >> value;
  std::string unit;
  in >> unit;
  INFLIGHT_CHECK_CODE(!in.fail() || in.eof(), ErrorCode::kInvalidArgument,
                      "--kv-cache-memory: cannot parse '{}'", text);
  INFLIGHT_CHECK_CODE(value > 0 && std::isfinite(value), ErrorCode::kInvalidArgument,
                      "--kv-cache-memory must be positive, got '{}'", text);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.empty() && value <= 1.0) {
    const double physical =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    return static_cast<int64_t>(value * physical);
  }
  double scale = 1;
  if (unit == "K" || unit == "KB" || unit == "KIB") scale = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") scale = 1024.0 * 1024 * 1024;
  else INFLIGHT_CHECK_CODE(unit.empty() || unit == "B", ErrorCode::kInvalidArgument,
                           "--kv-cache-memory: unknown unit '{}'", unit);
  return static_cast<int64_t>(value * scale);
}

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

std::string special_text(const Tokenizer& tok, int32_t id) {
  return id == kNoToken ? std::string() : std::string(tok.token_text(id));
}

std::shared_ptr<const server::LoadedModel> load_model(const std::string& path) {
  const auto files = ModelFiles::open(path);
  auto model = std::make_shared<server::LoadedModel>();
  model->tokenizer = Tokenizer::from_path(files->tokenizer_path());
  std::string tmpl = opts.chat_template.empty() ? files->chat_template()
                                                : read_chat_template(opts.chat_template);
  if (!tmpl.empty()) {
    model->chat_template = std::make_shared<ChatTemplate>(ChatTemplate::parse(tmpl));
  } else {
    INFLIGHT_LOG_WARN("the model has no chat template: /v1/chat/completions will answer 400 "
                      "(pass --chat-template)");
  }
  model->bos_token = special_text(*model->tokenizer, model->tokenizer->bos_id());
  model->eos_token = special_text(*model->tokenizer, model->tokenizer->eos_id());

  EngineConfig config;
  config.max_model_len = opts.max_model_len;
  config.max_num_seqs = opts.max_num_seqs;
  config.max_num_batched_tokens = opts.max_num_batched_tokens;
  config.block_size = opts.block_size;
  config.kv_cache_bytes = parse_memory(opts.kv_cache_memory);
  config.enable_prefix_caching = !opts.disable_prefix_caching;
  config.max_logprobs = opts.max_logprobs;
  auto runner = std::make_unique<LlamaRunner>(std::make_unique<CpuBackend>(), *files);
  auto engine = Engine::create(config, std::move(runner), model->tokenizer);
  INFLIGHT_CHECK_CODE(engine.ok(), ErrorCode::kInvalidArgument, "cannot start the engine: {}",
                      engine.status().to_string());
  model->engine = std::shared_ptr<Engine>(std::move(engine).value());

  model->max_model_len = model->engine->config().max_model_len;
  model->limits.max_logprobs = model->engine->config().max_logprobs;
  model->limits.vocab_size =
      std::min<int64_t>(model->engine->vocab_size(), model->tokenizer->vocab_size());
  // n choices run side by side: no more than one step holds.
  model->limits.max_n =
      std::clamp<int32_t>(model->engine->config().max_num_seqs, 1, model->limits.max_n);
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
  app.add_option("--model", opts.model,
                 "Model (.gguf file or Hugging Face directory); default: models/" +
                     std::string(kDefaultModel));
  app.add_option("--host", http.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", http.port, "Port to listen on (0 = any free port)")
      ->capture_default_str();
  app.add_option("--api-key", server.api_key,
                 "Require 'Authorization: Bearer KEY' on /v1/* and the generation routes");
  app.add_option("--served-model-name", server.served_model_name,
                 "Model name in the API (default: the model file's name)");
  app.add_option("--max-model-len", opts.max_model_len,
                 "Longest prompt + output in tokens (default: the model's context length)");
  app.add_option("--max-num-seqs", opts.max_num_seqs, "Most sequences per engine step")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", opts.max_num_batched_tokens,
                 "Most tokens per engine step")
      ->capture_default_str();
  app.add_option("--kv-cache-memory", opts.kv_cache_memory,
                 "KV cache size: bytes (512MiB, 2G, 1073741824) or a fraction of RAM (0.1)")
      ->capture_default_str();
  app.add_option("--block-size", opts.block_size, "Tokens per KV block")->capture_default_str();
  app.add_flag("--disable-prefix-caching", opts.disable_prefix_caching,
               "Do not reuse the KV blocks of shared prompt prefixes");
  app.add_option("--max-logprobs", opts.max_logprobs, "Largest logprobs / top_logprobs allowed")
      ->capture_default_str();
  app.add_option("--chat-template", opts.chat_template,
                 "Jinja chat template file (or text) replacing the model's");
  app.add_option("--max-concurrent-requests", server.max_concurrent_requests,
                 "Generation requests in flight; more get 429")
      ->capture_default_str();
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

int run() {
  raise_fd_limit();
  const std::string path = opts.model.empty() ? find_default_model() : opts.model;
  auto& names = opts.server.options.served_model_name;
  if (names.empty()) names = fs::path(path).filename().replace_extension().string();

  server::Server server(opts.server);
  server.listen();
  INFLIGHT_LOG_INFO("serving '{}' on http://{}:{} (loading {})", names, opts.server.http.host,
                    server.port(), path);
  // Tests and scripts that pass --port 0 read the port from this line.
  std::printf("inflight serve: listening on %s:%d\n", opts.server.http.host.c_str(),
              server.port());
  std::fflush(stdout);

  std::shared_ptr<const server::LoadedModel> model;
  std::string load_error;
  std::thread loader([&] {
    try {
      model = load_model(path);
      server.load(model);
      INFLIGHT_LOG_INFO("model loaded: max_model_len {}, ready", model->max_model_len);
    } catch (const std::exception& e) {
      load_error = e.what();
      server.stop();
    }
  });
  server.run();
  loader.join();
  if (model) model->engine->shutdown(ShutdownMode::kAbort);
  if (!load_error.empty()) {
    std::fprintf(stderr, "error: %s\n", load_error.c_str());
    return 1;
  }
  INFLIGHT_LOG_INFO("server stopped");
  return 0;
}

const bool kRegistered = register_command(
    {"serve", "Serve the OpenAI- and TGI-compatible HTTP API", &setup, &run});

}  // namespace
}  // namespace inflight::tools
