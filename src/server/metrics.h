// GET /metrics: the engine's and the HTTP layer's figures in Prometheus text.
//
// Names follow vLLM's `vllm:` set under ServerOptions::metrics_prefix, `inflight_` by default:
// `promtool check metrics` flags every name with a colon (colons are reserved for recording
// rules by convention), so the default exposition lints clean; `--metrics-prefix inflight:`
// gives vLLM's exact form (valid exposition, scraped by Prometheus alike) for dashboards written
// against `vllm:` names.
//   gauges      num_requests_running, num_requests_waiting, kv_cache_usage_perc (0..1),
//               kv_cache_used_blocks, kv_cache_total_blocks
//   counters    prompt_tokens, generation_tokens, prefix_cache_queries, prefix_cache_hits,
//               num_preemptions, request_success{finished_reason}, device_busy_seconds,
//               device_idle_seconds (GPU utilisation between steps = busy / (busy + idle))
//   histograms  time_to_first_token_seconds, inter_token_latency_seconds,
//               e2e_request_latency_seconds, request_queue_time_seconds, engine_step_seconds
//   HTTP layer  http_requests, http_connections_open, http_client_disconnects,
//               http_requests_in_flight, http_requests_rejected, http_io_cpu_seconds,
//               http_streamed_tokens
// The HTTP layer's CPU time per token = delta(http_io_cpu_seconds) / delta(http_streamed_tokens).
#pragma once

#include <string>

#include "frontend/frontend.h"
#include "inflight/stats.h"
#include "server/http_server.h"

namespace inflight::server {

inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// `engine` null while the model loads: engine figures are then reported as zero.
// `prefix` starts every name; the front end gives the model name and its counters.
std::string render_metrics(const EngineStats* engine, const HttpServerStats& http,
                           const frontend::Frontend& frontend, const std::string& prefix);

}  // namespace inflight::server
