// GET /metrics: the engines' and the HTTP layer's figures in Prometheus text.
//
// Names follow vLLM's `vllm:` set under ServerOptions::metrics_prefix, `inflight_` by default:
// `promtool check metrics` flags every name with a colon (colons are reserved for recording
// rules by convention), so the default exposition lints clean; `--metrics-prefix inflight:`
// gives vLLM's exact form (valid exposition, scraped by Prometheus alike) for dashboards written
// against `vllm:` names. Every model's figures carry its `model_name` label (one sample per
// model served); the HTTP layer's connection figures are the server's, unlabelled.
//   gauges      num_requests_running, num_requests_waiting, kv_cache_usage_perc (0..1),
//               kv_cache_used_blocks, kv_cache_total_blocks
//   counters    prompt_tokens, generation_tokens, prefix_cache_queries, prefix_cache_hits,
//               num_preemptions, request_success{finished_reason}, device_busy_seconds,
//               device_idle_seconds (GPU utilisation between steps = busy / (busy + idle))
//   histograms  time_to_first_token_seconds, inter_token_latency_seconds,
//               e2e_request_latency_seconds, request_queue_time_seconds, engine_step_seconds
//   per model   http_requests_in_flight, http_requests_rejected, http_streamed_tokens
//   server      http_requests, http_connections_open, http_client_disconnects,
//               http_io_cpu_seconds
// The HTTP layer's CPU time per token = delta(http_io_cpu_seconds) / delta(http_streamed_tokens).
#pragma once

#include <string>
#include <vector>

#include "frontend/frontend.h"
#include "inflight/stats.h"
#include "server/http_server.h"

namespace inflight::server {

inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// One served model's figures.
struct ModelMetrics {
  std::string name;
  EngineStats engine;  // zeros while the model loads
  int64_t in_flight = 0;
  int64_t rejected = 0;
  int64_t tokens_sent = 0;
};
ModelMetrics model_metrics(const frontend::Frontend& frontend);

// `prefix` starts every name.
std::string render_metrics(const std::vector<ModelMetrics>& models, const HttpServerStats& http,
                           const std::string& prefix);

}  // namespace inflight::server
