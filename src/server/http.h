// Transport-neutral HTTP messages: what a route handler receives and returns.
//
// The Beast transport (http_server.cc) converts to and from these, so that protocol and route
// code never includes Boost. A response is one of:
//   - complete:  status, headers and body known when the handler returns;
//   - deferred:  `deferred` is set; the whole response is known later (a non-streaming
//                generation waiting for the engine);
//   - streamed:  `stream` is set; status and headers are sent at once, then the body in chunks
//                (Server-Sent Events) as the engine produces them.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inflight::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;   // upper case, as sent: "GET", "POST", ...
  std::string target;   // as sent: "/v1/models?x=1"
  std::string path;     // target without the query: "/v1/models"
  HttpHeaders headers;  // names lower-cased
  std::string body;

  // The first header named `name` (lower case), or nullptr.
  const std::string* header(std::string_view name) const;
  // How many headers are named `name` (lower case).
  size_t header_count(std::string_view name) const;
};

struct HttpResponse;

// A source of work that completes later. Its methods are called on the connection's strand
// (one at a time); `wake` may be called from any thread, at any time, any number of times, and
// makes the transport poll again soon. Spurious polls are allowed.
class PendingWork {
 public:
  virtual ~PendingWork() = default;
  // Called once, before any poll.
  virtual void start(std::function<void()> wake) = 0;
  // The client went away or the server is stopping: stop producing and release what is held
  // (engine requests, KV blocks). Idempotent; no poll follows.
  virtual void cancel() = 0;
};

// A whole response that becomes known later.
class DeferredResponse : public PendingWork {
 public:
  // The response once it is ready, else nullopt.
  virtual std::optional<HttpResponse> poll() = 0;
};

// A response body produced over time.
class StreamBody : public PendingWork {
 public:
  // Appends the bytes available now to `out`; returns true once the body is complete (the
  // bytes appended by that call are the last).
  virtual bool poll(std::string& out) = 0;
  // The server's shutdown deadline passed: stop producing soon but end the body the way it
  // ends on its own (a generation stream: its final events with finish reason "abort"). Polls
  // go on until one returns true. Idempotent.
  virtual void abort() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HttpHeaders headers;  // extra headers, e.g. {"Allow", "POST"}
  std::string body;
  std::shared_ptr<DeferredResponse> deferred;  // when set, everything else is ignored
  std::shared_ptr<StreamBody> stream;          // when set, `body` is ignored
  // Fields the access log adds to the response's line (token counts, time to first token),
  // read once the response has ended; a deferred response's final answer inherits it.
  std::function<std::string()> log_details;
};

// Handles one request. Runs on the connection's strand; must not block for long and must not
// throw (the router turns exceptions into error responses before they reach the transport).
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

}  // namespace inflight::server
