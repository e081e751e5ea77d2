// ServerContext: what every route shares: the engine once loaded, the tokenizer, the chat
// template, the served model's name and limits, and the server's own counters.
//
// The HTTP server starts before the model has loaded (GET /health answers 503 meanwhile);
// `load` publishes the engine once, after which the loaded members never change.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "inflight/engine.h"
#include "server/openai_protocol.h"
#include "server/tool_calls.h"

namespace inflight {
class ChatTemplate;
class Tokenizer;
}  // namespace inflight

namespace inflight::server {

struct ServerOptions {
  std::string served_model_name;   // what /v1/models lists and `model` must match
  std::string api_key;             // empty: no key needed
  int64_t max_concurrent_requests = 4096;  // generation requests in flight; more get 429
  std::string metrics_prefix = "inflight_";  // of every /metrics name ("inflight:" as vLLM)
  // How chat outputs of requests with tools are searched for calls (server/tool_calls.h);
  // none: the output is content.
  std::optional<ToolCallParser> tool_call_parser = std::nullopt;
};

struct LoadedModel {
  std::shared_ptr<Engine> engine;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<const ChatTemplate> chat_template;  // null: chat completions answer 400
  std::string bos_token;  // text of the special tokens, for the template
  std::string eos_token;
  int32_t max_model_len = 0;
  ProtocolLimits limits;
};

class ServerContext {
 public:
  explicit ServerContext(ServerOptions options);

  // Publishes the loaded model; from now on `ready()` is true.
  void load(std::shared_ptr<const LoadedModel> model);
  bool ready() const { return model_.load() != nullptr; }
  // The loaded model, or ApiError(503) while loading.
  const LoadedModel& model() const;
  // Nullptr while loading.
  std::shared_ptr<const LoadedModel> model_or_null() const { return model_.load(); }

  const ServerOptions& options() const { return options_; }
  int64_t created() const { return created_; }  // unix seconds of start-up
  const std::string& system_fingerprint() const { return fingerprint_; }

  // The `model` field of a request: empty or the served name; else ApiError(404).
  void check_model(const std::string& requested) const;

  // In-flight generation slots (one per client request): false when at the limit.
  bool try_acquire_slot();
  void release_slot();
  int64_t in_flight() const { return in_flight_.load(); }

  // Tokens sent to clients (the denominator of the HTTP layer's CPU time per token).
  void add_tokens_sent(int64_t n) { tokens_sent_.fetch_add(n, std::memory_order_relaxed); }
  int64_t tokens_sent() const { return tokens_sent_.load(std::memory_order_relaxed); }
  void add_rejected() { rejected_.fetch_add(1, std::memory_order_relaxed); }
  int64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }

 private:
  ServerOptions options_;
  int64_t created_ = 0;
  std::string fingerprint_;
  std::atomic<std::shared_ptr<const LoadedModel>> model_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> tokens_sent_{0};
  std::atomic<int64_t> rejected_{0};
};

}  // namespace inflight::server
