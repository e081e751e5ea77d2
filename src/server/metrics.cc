#include "server/metrics.h"

#include <functional>

#include "inflight/engine.h"
#include "server/prometheus.h"

namespace inflight::server {

namespace {

using Samples = std::vector<std::pair<PrometheusLabels, double>>;

// One sample per model of what `value` reads from it.
Samples per_model(const std::vector<ModelMetrics>& models,
                  const std::function<double(const ModelMetrics&)>& value) {
  Samples out;
  for (const ModelMetrics& m : models) out.push_back({{{"model_name", m.name}}, value(m)});
  return out;
}

std::vector<std::pair<PrometheusLabels, const Histogram*>> histograms(
    const std::vector<ModelMetrics>& models, Histogram EngineStats::*member) {
  std::vector<std::pair<PrometheusLabels, const Histogram*>> out;
  for (const ModelMetrics& m : models)
    out.push_back({{{"model_name", m.name}}, &(m.engine.*member)});
  return out;
}

}  // namespace

ModelMetrics model_metrics(const frontend::Frontend& frontend) {
  ModelMetrics m;
  m.name = frontend.options().served_model_name;
  if (auto model = frontend.model_or_null()) m.engine = model->engine->stats();
  m.in_flight = frontend.in_flight();
  m.rejected = frontend.rejected();
  m.tokens_sent = frontend.tokens_sent();
  return m;
}

std::string render_metrics(const std::vector<ModelMetrics>& models, const HttpServerStats& http,
                           const std::string& prefix) {
  PrometheusText out;
  const std::string& p = prefix;
  auto n = [](auto v) { return static_cast<double>(v); };
  auto gauge = [&](const std::string& name, const char* help,
                   const std::function<double(const ModelMetrics&)>& value) {
    out.labelled_gauge(p + name, help, per_model(models, value));
  };
  auto counter = [&](const std::string& name, const char* help,
                     const std::function<double(const ModelMetrics&)>& value) {
    out.labelled_counter(p + name, help, per_model(models, value));
  };

  gauge("num_requests_running", "Sequences in model execution batches.",
        [&](const ModelMetrics& m) { return n(m.engine.num_running); });
  gauge("num_requests_waiting", "Sequences waiting to be processed.",
        [&](const ModelMetrics& m) { return n(m.engine.num_waiting); });
  gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
        [&](const ModelMetrics& m) { return m.engine.kv_usage; });
  gauge("kv_cache_used_blocks", "KV-cache blocks held by sequences.", [&](const ModelMetrics& m) {
    return n(m.engine.num_kv_blocks - m.engine.num_free_kv_blocks);
  });
  gauge("kv_cache_total_blocks", "KV-cache blocks in the pool.",
        [&](const ModelMetrics& m) { return n(m.engine.num_kv_blocks); });

  counter("prompt_tokens", "Number of prefill tokens processed.",
          [&](const ModelMetrics& m) { return n(m.engine.num_prompt_tokens); });
  counter("generation_tokens", "Number of generation tokens processed.",
          [&](const ModelMetrics& m) { return n(m.engine.num_generation_tokens); });
  counter("prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
          [&](const ModelMetrics& m) { return n(m.engine.num_prefix_cache_queries); });
  counter("prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
          [&](const ModelMetrics& m) { return n(m.engine.num_prefix_cache_hits); });
  counter("num_preemptions", "Cumulative number of preemptions from the engine.",
          [&](const ModelMetrics& m) { return n(m.engine.num_preemptions); });
  counter("device_busy_seconds",
          "Device time of engine steps (zero where the device keeps no timeline).",
          [&](const ModelMetrics& m) { return m.engine.device_busy_seconds; });
  counter("device_idle_seconds", "Device idle time between back-to-back engine steps.",
          [&](const ModelMetrics& m) { return m.engine.device_idle_seconds; });
  Samples finished;
  for (const ModelMetrics& m : models) {
    const EngineStats& e = m.engine;
    for (const auto& [reason, count] :
         {std::pair{"stop", e.num_requests_stopped}, std::pair{"length", e.num_requests_length},
          std::pair{"abort", e.num_requests_aborted}, std::pair{"error", e.num_requests_failed}}) {
      finished.push_back({{{"model_name", m.name}, {"finished_reason", reason}}, n(count)});
    }
  }
  out.labelled_counter(p + "request_success", "Count of finished requests by finish reason.",
                       finished);

  out.labelled_histogram(p + "time_to_first_token_seconds", "Histogram of time to first token.",
                         histograms(models, &EngineStats::time_to_first_token));
  out.labelled_histogram(p + "inter_token_latency_seconds", "Histogram of inter-token latency.",
                         histograms(models, &EngineStats::inter_token_latency));
  out.labelled_histogram(p + "e2e_request_latency_seconds",
                         "Histogram of end to end request latency.",
                         histograms(models, &EngineStats::e2e_latency));
  out.labelled_histogram(p + "request_queue_time_seconds",
                         "Histogram of time spent waiting in the queue.",
                         histograms(models, &EngineStats::queue_time));
  out.labelled_histogram(p + "engine_step_seconds", "Histogram of engine step duration.",
                         histograms(models, &EngineStats::step_time));

  gauge("http_requests_in_flight", "Generation requests being served.",
        [&](const ModelMetrics& m) { return n(m.in_flight); });
  counter("http_requests_rejected", "Generation requests refused at capacity.",
          [&](const ModelMetrics& m) { return n(m.rejected); });
  counter("http_streamed_tokens", "Generated tokens delivered to clients.",
          [&](const ModelMetrics& m) { return n(m.tokens_sent); });

  out.counter(p + "http_requests", "HTTP requests received.", n(http.requests_total));
  out.gauge(p + "http_connections_open", "Open HTTP connections.", n(http.connections_open));
  out.counter(p + "http_client_disconnects", "Responses cancelled because the client disconnected.",
              n(http.client_disconnects_total));
  out.counter(p + "http_io_cpu_seconds",
              "CPU time of the HTTP I/O threads (parsing, templates, tokenizing, formatting, "
              "socket writes).",
              http.io_cpu_seconds);
  return out.text();
}

}  // namespace inflight::server
