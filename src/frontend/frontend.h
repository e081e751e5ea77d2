// Frontend: what every transport (HTTP, gRPC, a Python binding) shares about one served model:
// the model once loaded, its names, the in-flight generation slots and the counters. The
// request operations over it are in openai_api.h, tgi_api.h and tokenize_api.h; a server of
// several models holds one Frontend per model (model_registry.h).
//
// A transport starts before the model has loaded (the model is then "still loading", 503);
// `load` publishes it once, after which the loaded members never change. A Frontend owned by a
// shared_ptr is kept alive by every Generation on it, so a registry may drop an unloaded model
// while its last responses are still being written.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/loaded_model.h"
#include "frontend/tool_calls.h"

namespace inflight::frontend {

struct FrontendOptions {
  std::string served_model_name;           // what /v1/models lists and `model` must match
  int64_t max_concurrent_requests = 4096;  // generation requests in flight; more get 429
  // How chat outputs of requests with tools are searched for calls (frontend/tool_calls.h);
  // none: the output is content.
  std::optional<ToolCallParser> tool_call_parser = std::nullopt;
  std::vector<std::string> aliases = {};  // more names `model` may give
};

// The names TGI clients send for the one model a TGI server has (huggingface_hub's
// InferenceClient given a base URL): "tgi" and "dummy".
bool is_tgi_placeholder(std::string_view name);

class Frontend : public std::enable_shared_from_this<Frontend> {
 public:
  explicit Frontend(FrontendOptions options);

  // Publishes the loaded model; from now on `ready()` is true.
  void load(std::shared_ptr<const LoadedModel> model);
  bool ready() const { return model_.load() != nullptr; }
  // The loaded model, or ApiError(503) while loading.
  const LoadedModel& model() const;
  // Nullptr while loading.
  std::shared_ptr<const LoadedModel> model_or_null() const { return model_.load(); }

  const FrontendOptions& options() const { return options_; }
  int64_t created() const { return created_; }  // unix seconds of start-up
  const std::string& system_fingerprint() const { return fingerprint_; }

  // The `model` field of a request: empty, the served name, an alias or a TGI client's
  // placeholder; else ApiError(404).
  void check_model(const std::string& requested) const;
  // `name` is the served name or an alias.
  bool serves(std::string_view name) const;

  // In-flight generation slots (one per client request): false when at the limit.
  bool try_acquire_slot();
  void release_slot();
  int64_t in_flight() const { return in_flight_.load(); }
  // Unix milliseconds of the last generation request accepted (0: none yet).
  int64_t last_request_ms() const { return last_request_ms_.load(std::memory_order_relaxed); }

  // Tokens sent to clients (the denominator of a transport's CPU time per token).
  void add_tokens_sent(int64_t n) { tokens_sent_.fetch_add(n, std::memory_order_relaxed); }
  int64_t tokens_sent() const { return tokens_sent_.load(std::memory_order_relaxed); }
  int64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }

 private:
  FrontendOptions options_;
  int64_t created_ = 0;
  std::string fingerprint_;
  std::atomic<std::shared_ptr<const LoadedModel>> model_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> tokens_sent_{0};
  std::atomic<int64_t> rejected_{0};
  std::atomic<int64_t> last_request_ms_{0};
};

}  // namespace inflight::frontend
