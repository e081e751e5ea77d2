#include "bench/offline_bench.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <nlohmann/json.hpp>

#include "bench/engine_runs.h"
#include "bench/report.h"
#include "core/check.h"
#include "tokenizer/tokenizer.h"

namespace inflight::bench {
namespace {

constexpr int32_t kWarmupOutputLen = 4;

double seconds(TimePoint from, TimePoint to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

OfflineBenchResult run_offline_bench(const OfflineBenchOptions& o) {
  INFLIGHT_CHECK_CODE(o.num_prompts >= 1 && o.input_len >= 1 && o.output_len >= 1,
                      ErrorCode::kInvalidArgument,
                      "--num-prompts, --input-len and --output-len must be >= 1");
  std::optional<StructuredOutput> constraint;
  if (!o.json_schema.empty()) {
    constraint = StructuredOutput{StructuredOutput::Kind::kJsonSchema, o.json_schema, {}, true};
  }
  auto request = [&](std::vector<int32_t> prompt, int32_t output_len) {
    Request r = fixed_length_request(std::move(prompt), output_len);
    r.sampling.structured_output = constraint;
    return r;
  };
  LoadedEngine loaded = load_engine(o.engine);
  Engine& engine = *loaded.engine;
  OfflineBenchResult r;
  r.model = loaded.model;
  r.load_seconds = loaded.load_seconds;
  r.micro_batches = engine.config().max_num_micro_batches;
  auto prompts = random_prompt_ids(loaded.tokenizer.get(), engine.vocab_size(), o.num_prompts + 1,
                                   o.input_len, o.seed);
  for (int32_t w = 0; w < o.num_warmups; ++w) {
    std::vector<Request> warmup;
    warmup.push_back(request(prompts.back(), kWarmupOutputLen));
    const auto trace = run_all(engine, std::move(warmup));
    INFLIGHT_CHECK_CODE(trace[0].ok, ErrorCode::kInvalidArgument, "the warm-up request failed: {}",
                        trace[0].error);
  }
  prompts.pop_back();
  std::vector<Request> requests;
  for (auto& p : prompts) requests.push_back(request(std::move(p), o.output_len));
  const EngineStats stats_before = engine.stats();
  const TimePoint start = Clock::now();
  const auto traces = run_all(engine, std::move(requests));
  const EngineStats stats_after = engine.stats();
  r.device = device_time_between(stats_before, stats_after);
  r.preemptions = stats_after.num_preemptions - stats_before.num_preemptions;
  r.grammar_masks = stats_after.num_grammar_masks - stats_before.num_grammar_masks;
  r.grammar_mask_seconds = stats_after.grammar_mask_seconds - stats_before.grammar_mask_seconds;
  TimePoint end = start;
  std::vector<double> ttfts, e2els;
  for (const auto& t : traces) {
    if (!t.ok) {
      ++r.failed;
      if (r.first_error.empty()) r.first_error = t.error;
      continue;
    }
    ++r.completed;
    r.total_input_tokens += t.prompt_tokens;
    r.total_output_tokens += t.output_tokens;
    end = std::max(end, t.finished);
    ttfts.push_back(seconds(start, t.token_times.front()));
    e2els.push_back(seconds(start, t.finished));
  }
  engine.shutdown(ShutdownMode::kAbort);
  r.elapsed_time = seconds(start, end);
  if (r.elapsed_time > 0.0) {
    r.requests_per_second = r.completed / r.elapsed_time;
    r.output_throughput = static_cast<double>(r.total_output_tokens) / r.elapsed_time;
    r.total_token_throughput =
        static_cast<double>(r.total_input_tokens + r.total_output_tokens) / r.elapsed_time;
  }
  r.ttft_ms = summarize(ttfts, o.percentiles, 1000.0);
  r.e2el_ms = summarize(e2els, o.percentiles, 1000.0);
  return r;
}

void print_offline_table(std::FILE* out, const OfflineBenchResult& r) {
  auto row = [out](const char* label, const std::string& value) {
    std::fprintf(out, "%-40s %-10s\n", label, value.c_str());
  };
  std::fprintf(out, "============ Offline Throughput Result =============\n");
  row("Successful requests:", fmt::format("{}", r.completed));
  row("Failed requests:", fmt::format("{}", r.failed));
  row("Elapsed time (s):", fmt::format("{:.2f}", r.elapsed_time));
  row("Total input tokens:", fmt::format("{}", r.total_input_tokens));
  row("Total generated tokens:", fmt::format("{}", r.total_output_tokens));
  row("Request throughput (req/s):", fmt::format("{:.2f}", r.requests_per_second));
  row("Output token throughput (tok/s):", fmt::format("{:.2f}", r.output_throughput));
  row("Total Token throughput (tok/s):", fmt::format("{:.2f}", r.total_token_throughput));
  row("Mean TTFT (ms):", fmt::format("{:.2f}", r.ttft_ms.mean));
  row("Mean E2EL (ms):", fmt::format("{:.2f}", r.e2el_ms.mean));
  row("Model load time (s):", fmt::format("{:.2f}", r.load_seconds));
  row("Preemptions:", fmt::format("{}", r.preemptions));
  if (r.micro_batches > 1) row("Micro-batches in flight:", fmt::format("{}", r.micro_batches));
  if (r.grammar_masks > 0) {
    row("Token masks filled:", fmt::format("{}", r.grammar_masks));
    row("Mask time per token (us):",
        fmt::format("{:.2f}", 1e6 * r.grammar_mask_seconds / static_cast<double>(r.grammar_masks)));
    row("Mask time of elapsed (%):",
        fmt::format("{:.2f}", 100.0 * r.grammar_mask_seconds / std::max(r.elapsed_time, 1e-9)));
  }
  if (r.device.measured()) {
    row("Device idle between steps (%):", fmt::format("{:.2f}", 100.0 * r.device.idle_fraction()));
  }
  if (!r.first_error.empty()) row("First error:", r.first_error);
  std::fprintf(out, "%s\n", std::string(50, '=').c_str());
}

nlohmann::json offline_result_json(const OfflineBenchResult& r, const OfflineBenchOptions& o,
                                   const RunInfo& info) {
  nlohmann::json j;
  j["mode"] = "offline";
  add_run_info(j, info);
  j["model"] = r.model;
  j["backend"] = o.engine.source.device;
  j["quantization"] =
      o.engine.source.quantization.empty() ? "as stored" : o.engine.source.quantization;
  j["kv_cache_dtype"] = o.engine.source.kv_cache_dtype;
  j["tensor_parallel_size"] = o.engine.source.tensor_parallel_size;
  j["pipeline_parallel_size"] = o.engine.source.pipeline_parallel_size;
  j["max_num_micro_batches"] = r.micro_batches;
  j["num_prompts"] = o.num_prompts;
  j["input_len"] = o.input_len;
  j["output_len"] = o.output_len;
  j["seed"] = o.seed;
  j["percentiles"] = o.percentiles;
  j["load_seconds"] = r.load_seconds;
  j["completed"] = r.completed;
  j["failed"] = r.failed;
  j["total_input_tokens"] = r.total_input_tokens;
  j["total_output_tokens"] = r.total_output_tokens;
  j["elapsed_time"] = r.elapsed_time;
  j["requests_per_second"] = r.requests_per_second;
  j["output_throughput"] = r.output_throughput;
  j["total_token_throughput"] = r.total_token_throughput;
  j["tokens_per_second"] = r.total_token_throughput;  // vLLM `bench throughput`'s name
  add_summary_fields(j, "ttft", r.ttft_ms);
  add_summary_fields(j, "e2el", r.e2el_ms);
  add_device_time(j, r.device);
  j["num_preemptions"] = r.preemptions;
  if (!o.json_schema.empty()) {
    j["structured_output"] = "json_schema";
    j["json_schema"] = o.json_schema;
    j["grammar_masks"] = r.grammar_masks;
    j["grammar_mask_seconds"] = r.grammar_mask_seconds;
    j["mask_ns_per_token"] =
        r.grammar_masks > 0 ? 1e9 * r.grammar_mask_seconds / static_cast<double>(r.grammar_masks)
                            : 0.0;
    j["mask_fraction"] = r.elapsed_time > 0.0 ? r.grammar_mask_seconds / r.elapsed_time : 0.0;
  }
  return j;
}

}  // namespace inflight::bench
