// HttpServer: the HTTP/1.1 transport (Boost.Beast coroutines; all Boost stays in the .cc).
//
// Threads: `num_threads` run one io_context; every connection lives on its own strand, so a
// connection's handler, polls and writes never run concurrently. Keep-alive and pipelining are
// supported. Answered with an error and then closed, before the handler sees anything:
//   body over `max_body_bytes` 413; head over `max_header_bytes` 431; unparsable head 400;
//   ambiguous framing or a missing/repeated Host 400 (server/request_framing.h);
//   a Host this server is not served under 400 "Invalid host header" (server/host_check.h);
//   part of a request, then nothing more within `read_timeout_s` 408.
// A connection that sends nothing within `read_timeout_s` (or `idle_timeout_s` between
// requests) is closed without an answer. HEAD gets the handler's status and headers, no body.
// CORS headers and preflights: server/cors.h.
//
// While a deferred or streamed response is pending, a read stays posted on the socket: EOF or
// a reset means the client left, and the pending work is cancelled at once (which frees its
// engine request and KV blocks).
//
// Shutdown (`stop`, or SIGINT/SIGTERM when `handle_signals`): stop accepting, close idle
// connections, let in-flight responses finish for up to `shutdown_timeout_s`. Then (or at a
// second SIGINT/SIGTERM) pending whole responses are cancelled with 503 and streams are
// aborted (StreamBody::abort), which end with their own final events and the terminating
// chunk; whatever has not ended a few seconds later is dropped, and `run` returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/http.h"

namespace inflight::server {

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                      // 0 = pick a free port (see HttpServer::port)
  int num_threads = 2;                  // I/O threads
  int64_t max_body_bytes = 8 << 20;     // request bodies above this get 413
  int64_t max_header_bytes = 64 << 10;  // request heads above this get 431
  double read_timeout_s = 30;           // a request (head and body) must arrive within this
  double idle_timeout_s = 60;           // a keep-alive connection may sit idle this long
  double write_timeout_s = 60;          // one write may take this long (a stalled client)
  double shutdown_timeout_s = 10;       // in-flight requests may finish within this on stop
  int backlog = 4096;                   // listen backlog (many clients connect at once)
  bool handle_signals = true;           // SIGINT/SIGTERM/SIGUSR1 trigger a graceful stop
  bool access_log = true;               // one info line per request (HttpServer::Impl::log_access)
  // Host names served besides the built-in ones (server/host_check.h); "*" = any Host.
  std::vector<std::string> allowed_hosts;
  // Origins allowed cross-origin access (server/cors.h); empty = CORS off, "*" = any.
  std::vector<std::string> allowed_origins;
};

// Counters the transport keeps for /metrics.
struct HttpServerStats {
  int64_t connections_open = 0;
  int64_t connections_total = 0;
  int64_t requests_total = 0;
  int64_t client_disconnects_total = 0;  // pending responses cancelled by a client leaving
  double io_cpu_seconds = 0;             // CPU time spent by the I/O threads so far
};

class HttpServer {
 public:
  HttpServer(HttpServerConfig config, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; throws Error(kInvalidArgument) when the address cannot be bound.
  void listen();
  // The bound port (after listen).
  int port() const;
  // Serves until stopped; returns after the graceful shutdown completed.
  void run();
  // Starts a graceful stop. Thread-safe; async-signal-unsafe (use handle_signals instead).
  void stop();
  // Called once when a stop begins (signal or stop()), before in-flight work drains.
  void on_stop(std::function<void()> callback);

  HttpServerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inflight::server
