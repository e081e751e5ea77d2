// Aggregate serving metrics over the per-request records of one run, with the definitions and
// names of vLLM's `bench serve` so that results compare across tools:
//
//   completed / failed       requests that succeeded / did not (failed ones are excluded from
//                            every other figure); requests still in flight when a run was
//                            interrupted count as neither (not_finished).
//   output tokens            usage.completion_tokens; without usage, the tokenizer's count of the
//                            generated text, or without a tokenizer the number of token chunks.
//   TPOT (per request)       (E2E - TTFT) / (output_tokens - 1), for output_tokens > 1.
//   ITL                      pooled over all requests.
//   throughputs              completed requests, output tokens and input + output tokens over
//                            the measured duration (first request sent .. last response done).
//   request_goodput          completed requests meeting every SLO given (TTFT, TPOT, E2E; a
//                            request with one output token has TPOT 0) per second.
//   max_output_tokens_per_s  most token chunks arriving within one 1-second bucket (buckets from
//                            the earliest request start); max_concurrent_requests: most requests
//                            active within one bucket.
// Distributions are reported in milliseconds with stats.h's numpy conventions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bench/stats.h"
#include "bench/stream_recorder.h"

namespace inflight::bench {

// Service-level objectives for goodput, in milliseconds.
struct GoodputSlo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};

// "ttft:500,tpot:50,e2el:3000" (commas or spaces between pairs). Throws kInvalidArgument for an
// unknown metric, a bad number or a negative value.
GoodputSlo parse_goodput(std::string_view spec);
// "50,90,99" -> {50, 90, 99}; each in [0, 100].
std::vector<double> parse_percentiles(std::string_view spec);

// Counts the tokens of a generated text (for servers that send no usage).
using TokenCounter = std::function<int32_t(const std::string&)>;

struct BenchmarkMetrics {
  int32_t completed = 0;
  int32_t failed = 0;
  int32_t not_finished = 0;
  int32_t num_without_usage = 0;  // completed requests whose output tokens were counted locally
  int64_t total_input = 0;
  int64_t total_output = 0;
  double duration = 0.0;  // seconds
  double request_throughput = 0.0;
  std::optional<double> request_goodput;  // set when an SLO was given
  double output_throughput = 0.0;
  double total_token_throughput = 0.0;
  double max_output_tokens_per_s = 0.0;
  int32_t max_concurrent_requests = 0;
  Summary ttft_ms;
  Summary tpot_ms;
  Summary itl_ms;
  Summary e2el_ms;
  std::vector<int32_t> output_lens;  // per request, 0 unless completed
};

BenchmarkMetrics compute_metrics(std::span<const RequestRecord> records, double duration_s,
                                 std::span<const double> percentiles, const GoodputSlo& slo,
                                 const TokenCounter& count_tokens = {});

}  // namespace inflight::bench
