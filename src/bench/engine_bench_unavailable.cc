// Built instead of the engine benchmarks while the engine, the CPU backend or the tokenizer is
// absent from the build: `inflight bench offline|latency` then say so.
#include <nlohmann/json.hpp>

#include "bench/latency_bench.h"
#include "bench/offline_bench.h"
#include "core/check.h"

namespace inflight::bench {

OfflineBenchResult run_offline_bench(const OfflineBenchOptions&) {
  INFLIGHT_THROW(ErrorCode::kUnsupported, "this build has no engine: bench offline is unavailable");
}

LatencyBenchResult run_latency_bench(const LatencyBenchOptions&) {
  INFLIGHT_THROW(ErrorCode::kUnsupported, "this build has no engine: bench latency is unavailable");
}

void print_offline_table(std::FILE*, const OfflineBenchResult&) {}
void print_latency_table(std::FILE*, const LatencyBenchResult&, const LatencyBenchOptions&) {}
nlohmann::json offline_result_json(const OfflineBenchResult&, const OfflineBenchOptions&,
                                   const RunInfo&) {
  return {};
}
nlohmann::json latency_result_json(const LatencyBenchResult&, const LatencyBenchOptions&,
                                   const RunInfo&) {
  return {};
}

}  // namespace inflight::bench
