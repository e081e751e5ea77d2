// Reporting a serving benchmark: the table printed at the end of a run (laid out like vLLM's,
// so that the two read side by side) and the result JSON (field names like vLLM's, plus what
// GUIDE section 5 asks for). bench/results.schema.json documents every field.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/metrics.h"
#include "bench/run_info.h"
#include "bench/serve_bench.h"

namespace inflight::bench {

// What the run was, beyond the options: for the report only.
struct ServeReportContext {
  std::string dataset_name;  // "random" | "prompts"
  std::string tokenizer;     // path of the tokenizer used to build and count prompts
  std::vector<double> percentiles;
  GoodputSlo goodput;
  bool save_detailed = false;  // per-request arrays (input_lens, ttfts, itls, ...)
};

void print_serve_table(std::FILE* out, const BenchmarkMetrics& m, const ServeBenchRun& run,
                       const ServeBenchOptions& options, const ServeReportContext& context);

nlohmann::json serve_result_json(const BenchmarkMetrics& m, const ServeBenchRun& run,
                                 const ServeBenchOptions& options,
                                 const ServeReportContext& context, const RunInfo& info);

// mean_<metric>_ms, median_<metric>_ms, std_<metric>_ms and p<N>_<metric>_ms.
void add_summary_fields(nlohmann::json& result, const std::string& metric, const Summary& s);

// "p99" for 99, "p99.9" for 99.9 (vLLM's key spelling).
std::string percentile_key(double p);

// Writes pretty-printed JSON, creating parent directories. Throws kNotFound when it cannot.
void write_json_file(const std::string& path, const nlohmann::json& value);

}  // namespace inflight::bench
