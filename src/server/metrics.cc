#include "server/metrics.h"

#include "server/prometheus.h"

namespace inflight::server {

std::string render_metrics(const EngineStats* engine, const HttpServerStats& http,
                           const frontend::Frontend& frontend, const std::string& prefix) {
  static const EngineStats kEmpty;
  const EngineStats& e = engine ? *engine : kEmpty;
  PrometheusText out({{"model_name", frontend.options().served_model_name}});
  const std::string& p = prefix;

  out.gauge(p + "num_requests_running", "Sequences in model execution batches.",
            static_cast<double>(e.num_running));
  out.gauge(p + "num_requests_waiting", "Sequences waiting to be processed.",
            static_cast<double>(e.num_waiting));
  out.gauge(p + "kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
            e.kv_usage);
  out.gauge(p + "kv_cache_used_blocks", "KV-cache blocks held by sequences.",
            static_cast<double>(e.num_kv_blocks - e.num_free_kv_blocks));
  out.gauge(p + "kv_cache_total_blocks", "KV-cache blocks in the pool.",
            static_cast<double>(e.num_kv_blocks));

  out.counter(p + "prompt_tokens", "Number of prefill tokens processed.",
              static_cast<double>(e.num_prompt_tokens));
  out.counter(p + "generation_tokens", "Number of generation tokens processed.",
              static_cast<double>(e.num_generation_tokens));
  out.counter(p + "prefix_cache_queries",
              "Prefix cache queries, in terms of number of queried tokens.",
              static_cast<double>(e.num_prefix_cache_queries));
  out.counter(p + "prefix_cache_hits",
              "Prefix cache hits, in terms of number of cached tokens.",
              static_cast<double>(e.num_prefix_cache_hits));
  out.counter(p + "num_preemptions", "Cumulative number of preemptions from the engine.",
              static_cast<double>(e.num_preemptions));
  out.counter(p + "device_busy_seconds",
              "Device time of engine steps (zero where the device keeps no timeline).",
              e.device_busy_seconds);
  out.counter(p + "device_idle_seconds",
              "Device idle time between back-to-back engine steps.", e.device_idle_seconds);
  out.labelled_counter(
      p + "request_success", "Count of finished requests by finish reason.",
      {{{{"finished_reason", "stop"}}, static_cast<double>(e.num_requests_stopped)},
       {{{"finished_reason", "length"}}, static_cast<double>(e.num_requests_length)},
       {{{"finished_reason", "abort"}}, static_cast<double>(e.num_requests_aborted)},
       {{{"finished_reason", "error"}}, static_cast<double>(e.num_requests_failed)}});

  out.histogram(p + "time_to_first_token_seconds", "Histogram of time to first token.",
                e.time_to_first_token);
  out.histogram(p + "inter_token_latency_seconds", "Histogram of inter-token latency.",
                e.inter_token_latency);
  out.histogram(p + "e2e_request_latency_seconds",
                "Histogram of end to end request latency.", e.e2e_latency);
  out.histogram(p + "request_queue_time_seconds",
                "Histogram of time spent waiting in the queue.", e.queue_time);
  out.histogram(p + "engine_step_seconds", "Histogram of engine step duration.",
                e.step_time);

  out.counter(p + "http_requests", "HTTP requests received.",
              static_cast<double>(http.requests_total));
  out.gauge(p + "http_connections_open", "Open HTTP connections.",
            static_cast<double>(http.connections_open));
  out.counter(p + "http_client_disconnects",
              "Responses cancelled because the client disconnected.",
              static_cast<double>(http.client_disconnects_total));
  out.gauge(p + "http_requests_in_flight", "Generation requests being served.",
            static_cast<double>(frontend.in_flight()));
  out.counter(p + "http_requests_rejected", "Generation requests refused at capacity.",
              static_cast<double>(frontend.rejected()));
  out.counter(p + "http_io_cpu_seconds",
              "CPU time of the HTTP I/O threads (parsing, templates, tokenizing, formatting, "
              "socket writes).",
              http.io_cpu_seconds);
  out.counter(p + "http_streamed_tokens", "Generated tokens delivered to clients.",
              static_cast<double>(frontend.tokens_sent()));
  return out.text();
}

}  // namespace inflight::server
