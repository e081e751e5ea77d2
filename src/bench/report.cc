#include "bench/report.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace inflight::bench {
namespace {

using nlohmann::json;

constexpr int kTableWidth = 50;

std::string centered(const std::string& title, char fill) {
  const int pad = std::max(0, kTableWidth - static_cast<int>(title.size()));
  return std::string(pad / 2, fill) + title + std::string(pad - pad / 2, fill);
}

void row(std::FILE* out, const std::string& label, const std::string& value) {
  std::fprintf(out, "%-40s %-10s\n", label.c_str(), value.c_str());
}

std::string fixed2(double v) {
  return fmt::format("{:.2f}", v);
}

struct MetricInfo {
  const char* key;    // ttft
  const char* label;  // TTFT
  const char* title;  // Time to First Token
  const Summary BenchmarkMetrics::*summary;
};

constexpr MetricInfo kMetrics[] = {
    {"ttft", "TTFT", "Time to First Token", &BenchmarkMetrics::ttft_ms},
    {"tpot", "TPOT", "Time per Output Token (excl. 1st token)", &BenchmarkMetrics::tpot_ms},
    {"itl", "ITL", "Inter-token Latency", &BenchmarkMetrics::itl_ms},
    {"e2el", "E2EL", "End-to-end Latency", &BenchmarkMetrics::e2el_ms},
};

double cpu_ms_per_request(const BenchmarkMetrics& m, const ServeBenchRun& run) {
  const int32_t n = m.completed + m.failed;
  return n > 0 ? run.client_cpu_seconds * 1000.0 / n : 0.0;
}

double cpu_utilization(const ServeBenchRun& run) {
  return run.duration > 0.0 ? run.client_cpu_seconds / run.duration : 0.0;
}

}  // namespace

std::string percentile_key(double p) {
  if (p == std::floor(p)) return fmt::format("p{}", static_cast<int64_t>(p));
  return fmt::format("p{}", p);
}

void add_summary_fields(json& result, const std::string& metric, const Summary& s) {
  result[fmt::format("mean_{}_ms", metric)] = s.mean;
  result[fmt::format("median_{}_ms", metric)] = s.median;
  result[fmt::format("std_{}_ms", metric)] = s.std;
  for (const auto& [p, v] : s.percentiles) {
    result[fmt::format("{}_{}_ms", percentile_key(p), metric)] = v;
  }
}

void print_serve_table(std::FILE* out, const BenchmarkMetrics& m, const ServeBenchRun& run,
                       const ServeBenchOptions& o, const ServeReportContext& c) {
  std::fprintf(out, "%s\n", centered(" Serving Benchmark Result ", '=').c_str());
  if (run.interrupted)
    row(out, "Interrupted; requests not finished:", fmt::format("{}", m.not_finished));
  row(out, "Successful requests:", fmt::format("{}", m.completed));
  row(out, "Failed requests:", fmt::format("{}", m.failed));
  if (o.max_concurrency > 0)
    row(out, "Maximum request concurrency:", fmt::format("{}", o.max_concurrency));
  row(out, "Request rate configured (RPS):",
      std::isinf(o.request_rate) ? std::string("inf") : fixed2(o.request_rate));
  row(out, "Benchmark duration (s):", fixed2(m.duration));
  row(out, "Total input tokens:", fmt::format("{}", m.total_input));
  row(out, "Total generated tokens:", fmt::format("{}", m.total_output));
  row(out, "Request throughput (req/s):", fixed2(m.request_throughput));
  if (m.request_goodput) row(out, "Request goodput (req/s):", fixed2(*m.request_goodput));
  row(out, "Output token throughput (tok/s):", fixed2(m.output_throughput));
  row(out, "Peak output token throughput (tok/s):", fixed2(m.max_output_tokens_per_s));
  row(out, "Peak concurrent requests:", fmt::format("{}", m.max_concurrent_requests));
  row(out, "Total Token throughput (tok/s):", fixed2(m.total_token_throughput));
  for (const auto& info : kMetrics) {
    const Summary& s = m.*info.summary;
    std::fprintf(out, "%s\n", centered(info.title, '-').c_str());
    row(out, fmt::format("Mean {} (ms):", info.label), fixed2(s.mean));
    row(out, fmt::format("Median {} (ms):", info.label), fixed2(s.median));
    for (const auto& [p, v] : s.percentiles) {
      row(out, fmt::format("P{} {} (ms):", percentile_key(p).substr(1), info.label), fixed2(v));
    }
  }
  std::fprintf(out, "%s\n", centered("Client", '-').c_str());
  row(out, "Client CPU time (s):", fixed2(run.client_cpu_seconds));
  row(out, "Client CPU per request (ms):", fmt::format("{:.3f}", cpu_ms_per_request(m, run)));
  row(out, "Client CPU utilization (%):", fixed2(100.0 * cpu_utilization(run)));
  if (m.num_without_usage > 0) {
    row(out, "Requests without usage chunk:", fmt::format("{}", m.num_without_usage));
  }
  std::fprintf(out, "%s\n", std::string(kTableWidth, '=').c_str());
}

json serve_result_json(const BenchmarkMetrics& m, const ServeBenchRun& run,
                       const ServeBenchOptions& o, const ServeReportContext& c,
                       const RunInfo& info) {
  json r;
  r["mode"] = "serve";
  add_run_info(r, info);
  if (o.backend == ServeBackend::kKServeGrpc) {
    r["backend"] = "kserve-grpc";
    r["grpc_url"] = o.grpc_target;
  } else {
    r["backend"] = o.endpoint == Endpoint::kCompletions ? "openai" : "openai-chat";
  }
  r["base_url"] = o.base_url;
  r["endpoint"] = o.endpoint_path;
  r["model"] = o.model;
  r["model_id"] = o.model;
  r["tokenizer_id"] = c.tokenizer;
  r["dataset_name"] = c.dataset_name;
  r["num_prompts"] = run.records.size();
  r["request_rate"] = std::isinf(o.request_rate) ? json("inf") : json(o.request_rate);
  r["burstiness"] = o.burstiness;
  r["max_concurrency"] = o.max_concurrency > 0 ? json(o.max_concurrency) : json(nullptr);
  r["seed"] = o.seed;
  r["ignore_eos"] = o.ignore_eos;
  r["percentiles"] = c.percentiles;
  json slo = json::object();
  if (c.goodput.ttft_ms) slo["ttft"] = *c.goodput.ttft_ms;
  if (c.goodput.tpot_ms) slo["tpot"] = *c.goodput.tpot_ms;
  if (c.goodput.e2el_ms) slo["e2el"] = *c.goodput.e2el_ms;
  r["goodput_slo_ms"] = slo;

  r["duration"] = m.duration;
  r["interrupted"] = run.interrupted;
  r["completed"] = m.completed;
  r["failed"] = m.failed;
  r["not_finished"] = m.not_finished;
  r["num_requests_without_usage"] = m.num_without_usage;
  r["total_input_tokens"] = m.total_input;
  r["total_output_tokens"] = m.total_output;
  r["request_throughput"] = m.request_throughput;
  r["request_goodput"] = m.request_goodput ? json(*m.request_goodput) : json(nullptr);
  r["output_throughput"] = m.output_throughput;
  r["total_token_throughput"] = m.total_token_throughput;
  r["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  r["max_concurrent_requests"] = m.max_concurrent_requests;
  for (const auto& metric : kMetrics) add_summary_fields(r, metric.key, m.*metric.summary);
  r["client_cpu_seconds"] = run.client_cpu_seconds;
  r["client_cpu_ms_per_request"] = cpu_ms_per_request(m, run);
  r["client_cpu_utilization"] = cpu_utilization(run);

  if (c.save_detailed) {
    json input_lens = json::array(), ttfts = json::array(), itls = json::array(),
         texts = json::array(), errors = json::array();
    for (const auto& rec : run.records) {
      input_lens.push_back(rec.prompt_len);
      ttfts.push_back(rec.success ? json(rec.ttft) : json(0.0));
      itls.push_back(rec.itl);
      texts.push_back(rec.generated_text);
      errors.push_back(rec.error);
    }
    r["input_lens"] = std::move(input_lens);
    r["output_lens"] = m.output_lens;
    r["ttfts"] = std::move(ttfts);
    r["itls"] = std::move(itls);
    r["generated_texts"] = std::move(texts);
    r["errors"] = std::move(errors);
  }
  return r;
}

void write_json_file(const std::string& path, const json& value) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p);
  INFLIGHT_CHECK_CODE(out.good(), ErrorCode::kNotFound, "cannot write '{}'", path);
  out << value.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
}

}  // namespace inflight::bench
