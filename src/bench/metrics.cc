#include "bench/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/check.h"

namespace inflight::bench {
namespace {

constexpr double kMsPerSecond = 1000.0;

std::vector<std::string_view> split(std::string_view s, std::string_view separators) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t end = std::min(s.find_first_of(separators, i), s.size());
    if (end > i) parts.push_back(s.substr(i, end - i));
    i = end + 1;
  }
  return parts;
}

double parse_number(std::string_view text, std::string_view what) {
  double v = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  INFLIGHT_CHECK_CODE(ec == std::errc() && end == text.data() + text.size() && std::isfinite(v),
                      ErrorCode::kInvalidArgument, "{}: '{}' is not a number", what, text);
  return v;
}

// Token chunk arrival times of a completed request, on the benchmark clock.
std::vector<double> token_times(const RequestRecord& r) {
  std::vector<double> times{r.start_time + r.ttft};
  for (double gap : r.itl) times.push_back(times.back() + gap);
  return times;
}

void peak_rates(std::span<const RequestRecord> records, BenchmarkMetrics& m) {
  double begin = 0.0;
  double end = 0.0;
  bool any = false;
  for (const auto& r : records) {
    if (!r.success) continue;
    begin = any ? std::min(begin, r.start_time) : r.start_time;
    end = any ? std::max(end, r.start_time + r.latency) : r.start_time + r.latency;
    any = true;
  }
  if (!any) return;
  const auto num_buckets = static_cast<size_t>(std::ceil(end - begin)) + 1;
  std::vector<double> tokens(num_buckets, 0.0);
  std::vector<int32_t> active(num_buckets, 0);
  for (const auto& r : records) {
    if (!r.success) continue;
    for (double t : token_times(r)) {
      const auto b = static_cast<size_t>(t - begin);
      if (b < num_buckets) tokens[b] += 1.0;
    }
    const auto first = static_cast<size_t>(r.start_time - begin);
    const auto last =
        std::min(static_cast<size_t>(r.start_time + r.latency - begin), num_buckets - 1);
    for (size_t b = first; b <= last; ++b) ++active[b];
  }
  m.max_output_tokens_per_s = *std::max_element(tokens.begin(), tokens.end());
  m.max_concurrent_requests = *std::max_element(active.begin(), active.end());
}

}  // namespace

GoodputSlo parse_goodput(std::string_view spec) {
  GoodputSlo slo;
  for (std::string_view pair : split(spec, ", ")) {
    const size_t colon = pair.find(':');
    INFLIGHT_CHECK_CODE(colon != std::string_view::npos, ErrorCode::kInvalidArgument,
                        "--goodput: expected metric:ms pairs, got '{}'", pair);
    const std::string_view name = pair.substr(0, colon);
    const double ms = parse_number(pair.substr(colon + 1), "--goodput");
    INFLIGHT_CHECK_CODE(ms >= 0.0, ErrorCode::kInvalidArgument,
                        "--goodput: {} must be >= 0 ms, got {}", name, ms);
    if (name == "ttft") {
      slo.ttft_ms = ms;
    } else if (name == "tpot") {
      slo.tpot_ms = ms;
    } else if (name == "e2el") {
      slo.e2el_ms = ms;
    } else {
      INFLIGHT_THROW(ErrorCode::kInvalidArgument,
                     "--goodput: unknown metric '{}' (ttft, tpot or e2el)", name);
    }
  }
  return slo;
}

std::vector<double> parse_percentiles(std::string_view spec) {
  std::vector<double> ps;
  for (std::string_view item : split(spec, ", ")) {
    const double p = parse_number(item, "--percentiles");
    INFLIGHT_CHECK_CODE(p >= 0.0 && p <= 100.0, ErrorCode::kInvalidArgument,
                        "--percentiles: {} is outside [0, 100]", p);
    ps.push_back(p);
  }
  return ps;
}

BenchmarkMetrics compute_metrics(std::span<const RequestRecord> records, double duration_s,
                                 std::span<const double> percentiles, const GoodputSlo& slo,
                                 const TokenCounter& count_tokens) {
  BenchmarkMetrics m;
  m.duration = duration_s;
  std::vector<double> ttfts, tpots, itls, e2els;
  int32_t good = 0;
  for (const auto& r : records) {
    if (r.state != RequestRecord::State::kDone) {
      ++m.not_finished;
      m.output_lens.push_back(0);
      continue;
    }
    if (!r.success) {
      ++m.failed;
      m.output_lens.push_back(0);
      continue;
    }
    int32_t output_len = r.output_tokens;
    if (output_len <= 0) {
      // vLLM treats a missing or zero usage count alike and counts the text instead.
      ++m.num_without_usage;
      output_len = count_tokens ? count_tokens(r.generated_text) : r.num_token_chunks;
    }
    m.output_lens.push_back(output_len);
    m.total_input += r.prompt_len;
    m.total_output += output_len;
    double tpot = 0.0;  // for goodput, a single-token answer has TPOT 0
    if (output_len > 1) {
      tpot = (r.latency - r.ttft) / (output_len - 1);
      tpots.push_back(tpot);
    }
    itls.insert(itls.end(), r.itl.begin(), r.itl.end());
    ttfts.push_back(r.ttft);
    e2els.push_back(r.latency);
    ++m.completed;
    const bool is_good = (!slo.ttft_ms || r.ttft * kMsPerSecond <= *slo.ttft_ms) &&
                         (!slo.tpot_ms || tpot * kMsPerSecond <= *slo.tpot_ms) &&
                         (!slo.e2el_ms || r.latency * kMsPerSecond <= *slo.e2el_ms);
    if (is_good) ++good;
  }
  if (duration_s > 0.0) {
    m.request_throughput = m.completed / duration_s;
    m.output_throughput = static_cast<double>(m.total_output) / duration_s;
    m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / duration_s;
    if (!slo.empty()) m.request_goodput = good / duration_s;
  } else if (!slo.empty()) {
    m.request_goodput = 0.0;
  }
  m.ttft_ms = summarize(ttfts, percentiles, kMsPerSecond);
  m.tpot_ms = summarize(tpots, percentiles, kMsPerSecond);
  m.itl_ms = summarize(itls, percentiles, kMsPerSecond);
  m.e2el_ms = summarize(e2els, percentiles, kMsPerSecond);
  peak_rates(records, m);
  return m;
}

}  // namespace inflight::bench
