#include "bench/latency_bench.h"

#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

#include "bench/engine_runs.h"
#include "bench/report.h"
#include "core/check.h"
#include "tokenizer/tokenizer.h"

namespace inflight::bench {
namespace {

double seconds(TimePoint from, TimePoint to) {
  return std::chrono::duration<double>(to - from).count();
}

// vLLM `bench latency` reports these percentiles of the iteration latency.
constexpr double kVllmLatencyPercentiles[] = {10, 25, 50, 75, 90, 99};

}  // namespace

LatencyBenchResult run_latency_bench(const LatencyBenchOptions& o) {
  INFLIGHT_CHECK_CODE(o.batch_size >= 1 && o.input_len >= 1 && o.output_len >= 1 &&
                          o.num_iters >= 1 && o.num_iters_warmup >= 0,
                      ErrorCode::kInvalidArgument,
                      "--batch-size, --input-len, --output-len and --num-iters must be >= 1");
  LoadedEngine loaded = load_engine(o.engine);
  Engine& engine = *loaded.engine;
  LatencyBenchResult r;
  r.model = loaded.model;
  r.load_seconds = loaded.load_seconds;
  std::vector<double> ttfts, steps;
  for (int32_t iter = 0; iter < o.num_iters_warmup + o.num_iters; ++iter) {
    // New prompts every iteration: the prefix cache must not turn the prefill into a lookup.
    const auto prompts = random_prompt_ids(loaded.tokenizer.get(), engine.vocab_size(),
                                           o.batch_size, o.input_len, o.seed + iter);
    std::vector<Request> batch;
    for (const auto& p : prompts) batch.push_back(fixed_length_request(p, o.output_len));
    const EngineStats stats_before = engine.stats();
    const TimePoint start = Clock::now();
    const auto traces = run_all(engine, std::move(batch));
    const DeviceTime device = device_time_between(stats_before, engine.stats());
    TimePoint first_token_of_last = start;
    TimePoint end = start;
    std::vector<double> iter_steps;
    for (const auto& t : traces) {
      INFLIGHT_CHECK_CODE(t.ok, ErrorCode::kInvalidArgument, "a request of the batch failed: {}",
                          t.error);
      first_token_of_last = std::max(first_token_of_last, t.token_times.front());
      end = std::max(end, t.finished);
      for (size_t i = 1; i < t.token_times.size(); ++i) {
        iter_steps.push_back(seconds(t.token_times[i - 1], t.token_times[i]));
      }
    }
    if (iter < o.num_iters_warmup) continue;
    r.device += device;
    r.latencies.push_back(seconds(start, end));
    ttfts.push_back(seconds(start, first_token_of_last));
    steps.insert(steps.end(), iter_steps.begin(), iter_steps.end());
  }
  engine.shutdown(ShutdownMode::kAbort);
  r.latency_ms = summarize(r.latencies, o.percentiles, 1000.0);
  r.ttft_ms = summarize(ttfts, o.percentiles, 1000.0);
  r.decode_step_ms = summarize(steps, o.percentiles, 1000.0);
  if (r.decode_step_ms.median > 0.0) {
    r.decode_tokens_per_s = o.batch_size / (r.decode_step_ms.median / 1000.0);
  }
  if (r.ttft_ms.median > 0.0) {
    r.prefill_tokens_per_s =
        static_cast<double>(o.batch_size) * o.input_len / (r.ttft_ms.median / 1000.0);
  }
  return r;
}

void print_latency_table(std::FILE* out, const LatencyBenchResult& r,
                         const LatencyBenchOptions& o) {
  auto row = [out](const std::string& label, const std::string& value) {
    std::fprintf(out, "%-40s %-10s\n", label.c_str(), value.c_str());
  };
  std::fprintf(out, "================= Latency Result =================\n");
  row("Batch size:", fmt::format("{}", o.batch_size));
  row("Input / output tokens:", fmt::format("{} / {}", o.input_len, o.output_len));
  row("Avg latency (s):", fmt::format("{:.4f}", r.latency_ms.mean / 1000.0));
  for (const auto& [p, v] : r.latency_ms.percentiles) {
    row(fmt::format("P{} latency (s):", percentile_key(p).substr(1)),
        fmt::format("{:.4f}", v / 1000.0));
  }
  row("Median TTFT, whole batch (ms):", fmt::format("{:.2f}", r.ttft_ms.median));
  row("Median decode step (ms):", fmt::format("{:.2f}", r.decode_step_ms.median));
  for (const auto& [p, v] : r.decode_step_ms.percentiles) {
    row(fmt::format("P{} decode step (ms):", percentile_key(p).substr(1)),
        fmt::format("{:.2f}", v));
  }
  row("Decode throughput (tok/s):", fmt::format("{:.2f}", r.decode_tokens_per_s));
  row("Prefill throughput (tok/s):", fmt::format("{:.2f}", r.prefill_tokens_per_s));
  if (r.device.measured()) {
    row("Device idle between steps (%):", fmt::format("{:.2f}", 100.0 * r.device.idle_fraction()));
  }
  std::fprintf(out, "%s\n", std::string(50, '=').c_str());
}

nlohmann::json latency_result_json(const LatencyBenchResult& r, const LatencyBenchOptions& o,
                                   const RunInfo& info) {
  nlohmann::json j;
  j["mode"] = "latency";
  add_run_info(j, info);
  j["model"] = r.model;
  j["backend"] = o.engine.source.device;
  j["quantization"] =
      o.engine.source.quantization.empty() ? "as stored" : o.engine.source.quantization;
  j["kv_cache_dtype"] = o.engine.source.kv_cache_dtype;
  j["tensor_parallel_size"] = o.engine.source.tensor_parallel_size;
  j["pipeline_parallel_size"] = o.engine.source.pipeline_parallel_size;
  j["batch_size"] = o.batch_size;
  j["input_len"] = o.input_len;
  j["output_len"] = o.output_len;
  j["num_iters"] = o.num_iters;
  j["num_iters_warmup"] = o.num_iters_warmup;
  j["seed"] = o.seed;
  j["percentiles"] = o.percentiles;
  j["load_seconds"] = r.load_seconds;
  j["avg_latency"] = r.latency_ms.mean / 1000.0;
  j["latencies"] = r.latencies;
  nlohmann::json vllm_percentiles = nlohmann::json::object();
  for (double p : kVllmLatencyPercentiles) {
    vllm_percentiles[fmt::format("{}", static_cast<int>(p))] = percentile(r.latencies, p);
  }
  j["percentiles_s"] = vllm_percentiles;
  add_summary_fields(j, "latency", r.latency_ms);
  add_summary_fields(j, "ttft", r.ttft_ms);
  add_summary_fields(j, "decode_step", r.decode_step_ms);
  j["decode_tokens_per_s"] = r.decode_tokens_per_s;
  j["prefill_tokens_per_s"] = r.prefill_tokens_per_s;
  add_device_time(j, r.device);
  return j;
}

}  // namespace inflight::bench
