// The Beast transport's internals, shared by its three files (the only server files that
// include Boost.Asio/Beast; they are heavy):
//   http_server.cc   accept loop, start and shutdown, the public interface
//   http_session.cc  one connection: read, check and dispatch requests, write responses
//   http_pending.cc  deferred and streamed responses, client-disconnect detection
//
// One coroutine per connection (`session`) runs on the connection's strand. While a response
// is pending, a second coroutine on the same strand (`watch_client`) keeps a read posted: its
// failure means the client left. All per-connection state below is touched only on the strand,
// except `Connection::wake`, which any thread may call.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "server/cors.h"
#include "server/host_check.h"
#include "server/http_server.h"

namespace inflight::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

inline constexpr auto kUse = asio::as_tuple(asio::use_awaitable);
// Bytes read ahead while a response is pending.
inline constexpr size_t kMaxPipelinedBytes = 1 << 20;
// Unread body drained (for up to kLingerTime) before an error close.
inline constexpr size_t kLingerBytes = 16 << 20;
inline constexpr auto kLingerTime = std::chrono::seconds(2);
// After the shutdown deadline, aborted streams get this long to write their final events.
inline constexpr auto kAbortGrace = std::chrono::seconds(3);

inline Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// The head every response carries: Server, Content-Type (unless empty) and the extra headers.
template <class Message>
void set_head(Message& msg, const HttpResponse& res) {
  msg.set(http::field::server, "inflight");
  if (!res.content_type.empty()) msg.set(http::field::content_type, res.content_type);
  for (auto& [name, value] : res.headers) msg.set(name, value);
}

struct Connection : std::enable_shared_from_this<Connection> {
  explicit Connection(tcp::socket socket)
      : stream(std::move(socket)),
        wake_timer(stream.get_executor()),
        read_timer(stream.get_executor()) {}

  // Any thread: makes the session poll its pending work again (coalesced).
  void wake() {
    if (wake_pending.exchange(true)) return;
    asio::post(stream.get_executor(), [self = shared_from_this()] {
      self->wake_pending = false;
      self->wake_timer.cancel();
    });
  }

  beast::tcp_stream stream;
  asio::steady_timer wake_timer;  // a pending session waits on it; wake() cancels it
  std::atomic<bool> wake_pending{false};
  beast::flat_buffer buffer;  // bytes read but not yet parsed (pipelined requests)
  bool busy = false;          // a request is being handled
  bool writing = false;       // a response write is in flight
  bool abort = false;         // the shutdown deadline passed: 503 or abort pending work
  // A request read's deadline. The stream's own timeout would close the socket, leaving no way
  // to answer 408, so the timer cancels the read instead; `read_epoch` changes when a read
  // ends, so a timer that fires late cancels nothing.
  asio::steady_timer read_timer;
  uint64_t read_epoch = 0;
  bool read_timed_out = false;
  bool client_gone = false;        // the watch read failed: EOF or reset
  bool watching = false;           // watch_client is running
  bool unwatch_requested = false;  // the session stopped watch_client
  asio::cancellation_signal stop_watch;
};

struct HttpServer::Impl {
  Impl(HttpServerConfig c, HttpHandler h)
      : config(std::move(c)),
        handler(std::move(h)),
        host_check(config.host, config.allowed_hosts),
        cors(config.allowed_origins),
        acceptor(ioc),
        control(asio::make_strand(ioc)),
        signals(control),
        shutdown_timer(control) {}

  asio::awaitable<void> accept_loop();
  asio::awaitable<void> session(std::shared_ptr<Connection> c);
  asio::awaitable<void> watch_client(std::shared_ptr<Connection> c);
  void begin_watch(const std::shared_ptr<Connection>& c);
  asio::awaitable<void> end_watch(Connection& c);
  asio::awaitable<void> wait_wake(Connection& c);
  void start_work(const std::shared_ptr<Connection>& c, PendingWork& work);
  asio::awaitable<std::optional<HttpResponse>> run_deferred(std::shared_ptr<Connection> c,
                                                            DeferredResponse& work);
  void arm_read_deadline(const std::shared_ptr<Connection>& c, double timeout_s);
  void end_read(Connection& c);
  std::optional<HttpResponse> check_head(unsigned version, const HttpHeaders& fields) const;
  asio::awaitable<bool> write_response(Connection& c, HttpResponse& res, unsigned version,
                                       bool keep_alive, bool head_only = false);
  asio::awaitable<bool> write_stream(std::shared_ptr<Connection> c, HttpResponse& res,
                                     unsigned version, bool keep_alive);
  asio::awaitable<void> linger_close(Connection& c);
  HttpResponse dispatch(HttpRequest& req);
  // One access log line (config.access_log): peer, request line, status or what ended it,
  // the response's log_details and the time from the request's head to its last byte.
  void log_access(Connection& c, std::string_view method, std::string_view target,
                  std::string_view outcome, const std::function<std::string()>& details,
                  std::chrono::steady_clock::time_point start) const;
  void wait_signal();
  void begin_stop();
  void abort_all();
  void for_each_connection(const std::function<void(const std::shared_ptr<Connection>&)>& fn);
  void forget(Connection* c);

  HttpServerConfig config;
  HttpHandler handler;
  HostCheck host_check;
  CorsPolicy cors;
  asio::io_context ioc;
  tcp::acceptor acceptor;
  // Start, stop, signals and the shutdown timer run on this strand, one at a time.
  asio::strand<asio::io_context::executor_type> control;
  asio::signal_set signals;
  asio::steady_timer shutdown_timer;
  bool aborted = false;  // on `control`: abort_all ran
  std::atomic<bool> stopping{false};
  std::function<void()> stop_callback;

  std::mutex mutex;  // guards connections and the CPU clocks
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections;
  std::vector<clockid_t> io_clocks;  // of the running I/O threads
  double io_cpu_finished = 0;        // CPU seconds of I/O threads that exited

  std::atomic<int64_t> connections_total{0};
  std::atomic<int64_t> requests_total{0};
  std::atomic<int64_t> client_disconnects{0};
};
}  // namespace inflight::server
