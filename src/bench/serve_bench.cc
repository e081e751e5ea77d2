#include "bench/serve_bench.h"

#include <sys/resource.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/arrivals.h"
#include "bench/kserve_grpc_client.h"
#include "bench/progress_bar.h"
#include "bench/sse_client.h"
#include "core/check.h"

namespace inflight::bench {
namespace {

namespace asio = boost::asio;
using SteadyClock = std::chrono::steady_clock;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr auto kProgressInterval = std::chrono::milliseconds(200);
constexpr auto kReadyPollInterval = std::chrono::milliseconds(500);

double thread_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

// Each stream holds a socket: lift the soft limit on open files (often 1024) to the hard one, so
// that thousands of concurrent streams do not fail with "too many open files".
void raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

struct RunState {
  RunState(asio::io_context& io, const ServeBenchOptions& o, size_t num_requests, BenchClock clock)
      : io(io),
        pool(io, parse_base_url(o.base_url)),
        options(o),
        clock(std::move(clock)),
        slot_freed(io),
        progress(static_cast<int64_t>(num_requests), o.progress) {}

  asio::io_context& io;
  ConnectionPool pool;
  const ServeBenchOptions& options;
  BenchClock clock;
  std::vector<StreamRequest> requests;  // bodies built before the clock starts
  std::vector<RequestRecord>* records = nullptr;
  std::vector<double> arrivals;
  int32_t in_flight = 0;
  size_t num_done = 0;
  asio::steady_timer slot_freed;  // cancelled each time a request ends
  ProgressBar progress;
  SteadyClock::time_point wall_start;
  double start = 0.0;
  double end = 0.0;
  bool finished = false;
  bool interrupted = false;
  std::string warmup_error;
  std::unique_ptr<KServeGrpcClient> kserve;  // the kKServeGrpc backend
};

// Streams request `i` over the run's backend.
asio::awaitable<void> send(RunState& s, size_t i, StreamRecorder& recorder,
                           const BenchClock& clock) {
  if (s.kserve) {
    co_await s.kserve->stream(s.io, i, recorder, clock);
  } else {
    co_await stream_request(s.pool, s.requests[i], recorder, clock);
  }
}

void finish(RunState& s) {
  if (s.finished) return;
  s.end = s.clock();
  s.finished = true;
  s.io.stop();
}

asio::awaitable<void> one_request(RunState& s, size_t i) {
  StreamRecorder recorder(s.options.endpoint, (*s.records)[i]);
  co_await send(s, i, recorder, s.clock);
  --s.in_flight;
  ++s.num_done;
  s.slot_freed.cancel_one();
  if (s.num_done == s.requests.size()) finish(s);
}

asio::awaitable<void> dispatch(RunState& s) {
  for (int32_t w = 0; w < s.options.num_warmups && !s.requests.empty(); ++w) {
    RequestRecord record;
    StreamRecorder recorder(s.options.endpoint, record);
    co_await send(s, 0, recorder, steady_bench_clock());
    if (w == 0 && !record.success) {
      s.warmup_error = record.error;
      s.io.stop();
      co_return;
    }
  }
  asio::steady_timer timer(s.io);
  s.wall_start = SteadyClock::now();
  s.start = s.clock();
  if (s.requests.empty()) finish(s);
  for (size_t i = 0; i < s.requests.size(); ++i) {
    if (s.arrivals[i] > 0.0) {
      timer.expires_at(s.wall_start + std::chrono::duration_cast<SteadyClock::duration>(
                                          std::chrono::duration<double>(s.arrivals[i])));
      co_await timer.async_wait(kTuple);
    }
    while (s.options.max_concurrency > 0 && s.in_flight >= s.options.max_concurrency) {
      s.slot_freed.expires_at(SteadyClock::time_point::max());
      co_await s.slot_freed.async_wait(kTuple);
    }
    ++s.in_flight;
    asio::co_spawn(s.io, one_request(s, i), asio::detached);
  }
}

asio::awaitable<void> show_progress(RunState& s) {
  asio::steady_timer timer(s.io);
  while (!s.finished) {
    timer.expires_after(kProgressInterval);
    co_await timer.async_wait(kTuple);
    if (s.wall_start == SteadyClock::time_point{}) continue;  // still warming up
    s.progress.update(static_cast<int64_t>(s.num_done),
                      std::chrono::duration<double>(SteadyClock::now() - s.wall_start).count());
  }
}

}  // namespace

std::string request_body(const ServeBenchOptions& o, const BenchRequest& r) {
  nlohmann::json body = {{"model", o.model},
                         {"temperature", 0.0},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (o.endpoint == Endpoint::kCompletions) {
    body["prompt"] = r.prompt;
    body["max_tokens"] = r.output_len;
  } else {
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", r.prompt}}});
    // Both names: max_tokens is what older servers read, max_completion_tokens newer ones.
    body["max_tokens"] = r.output_len;
    body["max_completion_tokens"] = r.output_len;
  }
  if (o.ignore_eos) body["ignore_eos"] = true;
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string probe_server(const std::string& base_url, const std::string& api_key,
                         double ready_timeout_s) {
  const auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                 std::chrono::duration<double>(ready_timeout_s));
  std::pair<int, std::string> reply;
  for (;;) {
    asio::io_context io;
    ConnectionPool pool(io, parse_base_url(base_url));
    asio::co_spawn(
        io, simple_request(pool, "/v1/models", "", api_key),
        [&](std::exception_ptr, std::pair<int, std::string> r) { reply = std::move(r); });
    io.run();
    // Not up yet: no answer, 503, or no model listed yet (a server whose models still load).
    const bool no_model = reply.first == 200 && reply.second.find("\"id\"") == std::string::npos;
    const bool not_ready = reply.first == 0 || reply.first == 503 || no_model;
    if (!not_ready) break;
    INFLIGHT_CHECK_CODE(SteadyClock::now() < deadline, ErrorCode::kNotFound,
                        "{} is not ready after {} s: {}", base_url, ready_timeout_s,
                        reply.second.substr(0, 300));
    std::this_thread::sleep_for(kReadyPollInterval);
  }
  if (reply.first != 200) return "";
  const auto doc = nlohmann::json::parse(reply.second, nullptr, false);
  if (!doc.is_object() || !doc.contains("data") || !doc["data"].is_array() || doc["data"].empty() ||
      !doc["data"][0].is_object() || !doc["data"][0].contains("id") ||
      !doc["data"][0]["id"].is_string()) {
    return "";
  }
  return doc["data"][0]["id"].get<std::string>();
}

ServeBenchRun run_serve_bench(const ServeBenchOptions& o, const std::vector<BenchRequest>& requests,
                              std::function<double()> clock) {
  INFLIGHT_CHECK_CODE(o.max_concurrency >= 0, ErrorCode::kInvalidArgument,
                      "--max-concurrency must be >= 0, got {}", o.max_concurrency);
  raise_open_file_limit();
  ServeBenchRun run;
  run.records.resize(requests.size());
  asio::io_context io(1);
  RunState s(io, o, requests.size(), clock ? std::move(clock) : steady_bench_clock());
  s.records = &run.records;
  s.arrivals =
      arrival_times(static_cast<int32_t>(requests.size()), o.request_rate, o.burstiness, o.seed);
  for (size_t i = 0; i < requests.size(); ++i) {
    s.requests.push_back({o.endpoint_path, request_body(o, requests[i]), o.api_key});
    run.records[i].prompt_len = requests[i].prompt_len;
    run.records[i].expected_output_len = requests[i].output_len;
  }
  if (o.backend == ServeBackend::kKServeGrpc) {
    s.kserve = std::make_unique<KServeGrpcClient>(o.grpc_target, o.model, o.api_key);
    s.kserve->prepare(requests, o.ignore_eos);
  }
  asio::signal_set signals(io);
  if (o.handle_sigint) {
    signals.add(SIGINT);
    signals.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec || s.finished) return;
      s.interrupted = true;
      finish(s);
    });
  }
  asio::co_spawn(io, dispatch(s), asio::detached);
  asio::co_spawn(io, show_progress(s), asio::detached);
  const double cpu_before = thread_cpu_seconds();
  io.run();
  run.client_cpu_seconds = thread_cpu_seconds() - cpu_before;
  if (s.finished) {
    s.progress.update(static_cast<int64_t>(s.num_done),
                      std::chrono::duration<double>(SteadyClock::now() - s.wall_start).count());
  }
  s.progress.close();
  INFLIGHT_CHECK_CODE(s.warmup_error.empty(), ErrorCode::kInvalidArgument,
                      "the warm-up request failed: {}", s.warmup_error);
  run.duration = s.end - s.start;
  run.interrupted = s.interrupted;
  return run;
}

}  // namespace inflight::bench
