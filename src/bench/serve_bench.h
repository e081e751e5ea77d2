// The run of `inflight bench serve`: sends a request set to an OpenAI-compatible server on an
// arrival schedule (arrivals.h) under an optional cap on requests in flight, streams every
// response (sse_client.h) and records per-request timings (stream_recorder.h). Aggregation and
// reporting are separate (metrics.h, report.h).
//
// Timing: the run starts when the first arrival is scheduled and ends when the last response is
// done; a request's start is when it is sent, after any wait for a free slot. The client runs on
// the calling thread only, and its CPU time (getrusage, that thread) is reported, so that a
// client-bound run shows.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "bench/datasets.h"
#include "bench/stream_recorder.h"

namespace inflight::bench {

// How requests stream: OpenAI SSE over HTTP, or KServe v2 ModelStreamInfer over gRPC
// (kserve_grpc_client.h; the HTTP base URL still serves the readiness probe).
enum class ServeBackend { kOpenAI, kKServeGrpc };

struct ServeBenchOptions {
  ServeBackend backend = ServeBackend::kOpenAI;
  std::string grpc_target = "127.0.0.1:8001";  // kKServeGrpc: host:port
  std::string base_url = "http://127.0.0.1:8000";
  Endpoint endpoint = Endpoint::kCompletions;
  std::string endpoint_path = "/v1/completions";
  std::string model;  // the "model" field of each request
  std::string api_key;
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int32_t max_concurrency = 0;  // 0 = no cap
  bool ignore_eos = false;
  uint64_t seed = 0;
  // Requests sent (with the first prompt) before the measured run and not counted; the first
  // one failing aborts the benchmark with its error, as a readiness check.
  int32_t num_warmups = 0;
  bool progress = true;
  // Ctrl-C stops the run and returns what was measured (requests in flight are not finished).
  bool handle_sigint = true;
};

struct ServeBenchRun {
  std::vector<RequestRecord> records;  // one per request, in request order
  double duration = 0.0;               // seconds
  bool interrupted = false;
  double client_cpu_seconds = 0.0;  // user + system time of the client thread during the run
};

// The JSON body of one streaming request.
std::string request_body(const ServeBenchOptions& options, const BenchRequest& request);

// Waits until the server is ready: polls GET /v1/models while the connection is refused or the
// answer is 503 (still loading), for at most ready_timeout_s seconds. Returns the first model
// it lists, or "" when it answers without a list. Throws kUnavailable on timeout.
std::string probe_server(const std::string& base_url, const std::string& api_key,
                         double ready_timeout_s);

// `clock` times requests and the run (empty: a monotonic clock). Throws for bad options and for
// a failed warm-up request.
ServeBenchRun run_serve_bench(const ServeBenchOptions& options,
                              const std::vector<BenchRequest>& requests,
                              std::function<double()> clock = {});

}  // namespace inflight::bench
