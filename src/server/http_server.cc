// The Beast transport. The only server file that includes Boost.Asio/Beast (they are heavy).
//
// One coroutine per connection (`session`) runs on the connection's strand. While a response
// is pending, a second coroutine on the same strand (`watch_client`) keeps a read posted: its
// failure means the client left. All per-connection state below is touched only on the strand,
// except `Connection::wake`, which any thread may call.
#include "server/http_server.h"

#include <pthread.h>
#include <time.h>

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

#include <array>
#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/check.h"
#include "core/logging.h"
#include "server/http_responses.h"

namespace inflight::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kUse = asio::as_tuple(asio::use_awaitable);
constexpr size_t kMaxPipelinedBytes = 1 << 20;  // bytes read ahead while a response is pending
constexpr size_t kLingerBytes = 16 << 20;       // unread body drained before an error close
constexpr auto kLingerTime = std::chrono::seconds(2);

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

double thread_cpu_seconds(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

struct Connection : std::enable_shared_from_this<Connection> {
  explicit Connection(tcp::socket socket)
      : stream(std::move(socket)), wake_timer(stream.get_executor()) {}

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
  beast::flat_buffer buffer;       // bytes read but not yet parsed (pipelined requests)
  bool busy = false;               // a request is being handled
  bool writing = false;            // a response write is in flight
  bool abort = false;              // the shutdown deadline passed: drop pending work
  bool client_gone = false;        // the watch read failed: EOF or reset
  bool watching = false;           // watch_client is running
  bool unwatch_requested = false;  // the session stopped watch_client
  asio::cancellation_signal stop_watch;
};

struct HttpServer::Impl {
  Impl(HttpServerConfig c, HttpHandler h)
      : config(std::move(c)), handler(std::move(h)), acceptor(ioc), signals(ioc),
        shutdown_timer(ioc) {}

  asio::awaitable<void> accept_loop();
  asio::awaitable<void> session(std::shared_ptr<Connection> c);
  asio::awaitable<void> watch_client(std::shared_ptr<Connection> c);
  void begin_watch(const std::shared_ptr<Connection>& c);
  asio::awaitable<void> end_watch(Connection& c);
  asio::awaitable<void> wait_wake(Connection& c);
  void start_work(const std::shared_ptr<Connection>& c, PendingWork& work);
  asio::awaitable<std::optional<HttpResponse>> run_deferred(std::shared_ptr<Connection> c,
                                                            DeferredResponse& work);
  asio::awaitable<bool> write_response(Connection& c, HttpResponse& res, unsigned version,
                                       bool keep_alive);
  asio::awaitable<bool> write_stream(std::shared_ptr<Connection> c, HttpResponse& res,
                                     unsigned version, bool keep_alive);
  asio::awaitable<void> linger_close(Connection& c);
  HttpResponse dispatch(HttpRequest& req);
  void begin_stop();
  void abort_all();
  void for_each_connection(const std::function<void(const std::shared_ptr<Connection>&)>& fn);
  void forget(Connection* c);

  HttpServerConfig config;
  HttpHandler handler;
  asio::io_context ioc;
  tcp::acceptor acceptor;
  asio::signal_set signals;
  asio::steady_timer shutdown_timer;
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

// ---- accept and lifecycle --------------------------------------------------------------------

asio::awaitable<void> HttpServer::Impl::accept_loop() {
  while (!stopping) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(ioc), kUse);
    if (ec) {
      if (stopping || ec == asio::error::operation_aborted) break;
      // EMFILE and friends: back off briefly instead of spinning.
      INFLIGHT_LOG_WARN("accept failed: {}", ec.message());
      asio::steady_timer pause(ioc, std::chrono::milliseconds(50));
      co_await pause.async_wait(kUse);
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);  // SSE chunks are small and latency-bound
    auto c = std::make_shared<Connection>(std::move(socket));
    {
      std::lock_guard lock(mutex);
      connections.emplace(c.get(), c);
    }
    ++connections_total;
    asio::co_spawn(c->stream.get_executor(), session(c), asio::detached);
  }
}

void HttpServer::Impl::for_each_connection(
    const std::function<void(const std::shared_ptr<Connection>&)>& fn) {
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard lock(mutex);
    for (auto& [ptr, weak] : connections) {
      if (auto c = weak.lock()) live.push_back(std::move(c));
    }
  }
  for (auto& c : live) fn(c);
}

void HttpServer::Impl::forget(Connection* c) {
  bool last = false;
  {
    std::lock_guard lock(mutex);
    connections.erase(c);
    last = connections.empty();
  }
  if (last && stopping) {
    asio::post(ioc, [this] { shutdown_timer.cancel(); });
  }
}

// Runs on the io_context (not a strand): stop accepting, close idle connections, arm the
// deadline after which pending work is dropped.
void HttpServer::Impl::begin_stop() {
  if (stopping.exchange(true)) return;
  INFLIGHT_LOG_INFO("server: stopping (up to {:.1f} s for in-flight requests)",
                    config.shutdown_timeout_s);
  beast::error_code ec;
  acceptor.close(ec);
  signals.cancel(ec);
  if (stop_callback) stop_callback();
  for_each_connection([](const std::shared_ptr<Connection>& c) {
    asio::post(c->stream.get_executor(), [c] {
      if (!c->busy) c->stream.socket().close();  // ends the idle wait for the next request
    });
  });
  bool none;
  {
    std::lock_guard lock(mutex);
    none = connections.empty();
  }
  if (none) return;
  shutdown_timer.expires_after(seconds(config.shutdown_timeout_s));
  shutdown_timer.async_wait([this](beast::error_code ec) {
    if (ec) return;  // every connection finished in time
    abort_all();
  });
}

void HttpServer::Impl::abort_all() {
  for_each_connection([](const std::shared_ptr<Connection>& c) {
    asio::post(c->stream.get_executor(), [c] {
      c->abort = true;
      c->wake_timer.cancel();
      if (c->writing) c->stream.socket().close();  // blocked on a client that does not read
    });
  });
  // Last resort: a connection that does not wind down within a second is abandoned.
  shutdown_timer.expires_after(std::chrono::seconds(1));
  shutdown_timer.async_wait([this](beast::error_code ec) {
    if (!ec) ioc.stop();
  });
}

// ---- one connection --------------------------------------------------------------------------

HttpResponse HttpServer::Impl::dispatch(HttpRequest& req) {
  try {
    return handler(req);
  } catch (const std::exception& e) {
    INFLIGHT_LOG_ERROR("handler for {} {} threw: {}", req.method, req.path, e.what());
  } catch (...) {
    INFLIGHT_LOG_ERROR("handler for {} {} threw", req.method, req.path);
  }
  return error_response(500, "internal server error");
}

namespace {

HttpRequest to_request(http::request<http::string_body>& msg) {
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  auto q = req.target.find('?');
  req.path = q == std::string::npos ? req.target : req.target.substr(0, q);
  for (const auto& field : msg) {
    std::string name(field.name_string());
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    req.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  req.body = std::move(msg.body());
  return req;
}

}  // namespace

asio::awaitable<void> HttpServer::Impl::session(std::shared_ptr<Connection> c) {
  Connection& conn = *c;
  int64_t served = 0;
  while (!stopping) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(static_cast<uint64_t>(config.max_body_bytes));
    parser.header_limit(static_cast<uint32_t>(config.max_header_bytes));
    bool fresh = served == 0 || conn.buffer.size() > 0;
    conn.stream.expires_after(seconds(fresh ? config.read_timeout_s : config.idle_timeout_s));
    auto [ec, n] = co_await http::async_read_header(conn.stream, conn.buffer, parser, kUse);
    HttpResponse early;
    if (ec == http::error::body_limit) {
      early = error_response(413, "request body too large");
    } else if (ec == http::error::header_limit) {
      early = error_response(431, "request header fields too large");
    } else if (ec && ec != http::error::end_of_stream && ec != beast::error::timeout &&
               ec != asio::error::eof && ec != asio::error::operation_aborted &&
               ec != asio::error::connection_reset && ec != asio::error::bad_descriptor &&
               conn.buffer.size() + n > 0) {
      early = error_response(400, "malformed HTTP request");
    } else if (ec) {
      break;  // the client closed, went idle too long, or the server is stopping
    }
    if (early.status == 200) {
      auto& head = parser.get();
      if (beast::iequals(head[http::field::expect], "100-continue")) {
        http::response<http::empty_body> cont{http::status::continue_, head.version()};
        auto [wec, wn] = co_await http::async_write(conn.stream, cont, kUse);
        if (wec) break;
      }
      conn.stream.expires_after(seconds(config.read_timeout_s));
      std::tie(ec, n) = co_await http::async_read(conn.stream, conn.buffer, parser, kUse);
      if (ec == http::error::body_limit) {
        early = error_response(413, "request body too large");
      } else if (ec == beast::error::timeout || ec == http::error::end_of_stream ||
                 ec == asio::error::eof ||
                 ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
        break;
      } else if (ec) {
        early = error_response(400, "malformed HTTP request");
      }
    }
    if (early.status != 200) {
      // The rest of the request was not read: answer, then close without resetting.
      conn.stream.expires_after(seconds(config.write_timeout_s));
      co_await write_response(conn, early, 11, false);
      co_await linger_close(conn);
      break;
    }

    ++served;
    ++requests_total;
    auto& msg = parser.get();
    unsigned version = msg.version();
    bool keep_alive = msg.keep_alive();
    HttpRequest req = to_request(msg);
    conn.busy = true;
    HttpResponse res = dispatch(req);
    bool ok = true;
    if (res.deferred) {
      auto deferred = std::move(res.deferred);
      std::optional<HttpResponse> ready = co_await run_deferred(c, *deferred);
      if (ready) {
        res = std::move(*ready);
      } else if (conn.abort && !conn.client_gone) {
        res = error_response(503, "the server is shutting down");
      } else {
        ok = false;
      }
    }
    keep_alive = keep_alive && !stopping && !conn.abort;
    if (ok) {
      if (res.stream) {
        ok = co_await write_stream(c, res, version, keep_alive);
      } else {
        conn.stream.expires_after(seconds(config.write_timeout_s));
        conn.writing = true;
        ok = co_await write_response(conn, res, version, keep_alive);
        conn.writing = false;
      }
    }
    conn.busy = false;
    if (!ok || !keep_alive) break;
  }
  beast::error_code ignored;
  conn.stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  conn.stream.socket().close(ignored);
  forget(c.get());
}

asio::awaitable<bool> HttpServer::Impl::write_response(Connection& c, HttpResponse& res,
                                                       unsigned version, bool keep_alive) {
  http::response<http::string_body> msg{static_cast<http::status>(res.status), version};
  msg.set(http::field::server, "inflight");
  msg.set(http::field::content_type, res.content_type);
  for (auto& [name, value] : res.headers) msg.set(name, value);
  msg.body() = std::move(res.body);
  msg.keep_alive(keep_alive);
  msg.prepare_payload();
  auto [ec, n] = co_await http::async_write(c.stream, msg, kUse);
  co_return !ec;
}

// Reads and drops what the client still sends (for a bounded time), so that closing does not
// reset the connection before the client has read our error response.
asio::awaitable<void> HttpServer::Impl::linger_close(Connection& c) {
  beast::error_code ec;
  c.stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  c.stream.expires_after(kLingerTime);
  std::array<char, 16384> sink;
  size_t drained = 0;
  while (drained < kLingerBytes) {
    auto [rec, n] = co_await c.stream.async_read_some(asio::buffer(sink), kUse);
    if (rec) break;
    drained += n;
  }
}

// ---- pending work: wake-ups and client-disconnect detection ---------------------------------

asio::awaitable<void> HttpServer::Impl::watch_client(std::shared_ptr<Connection> c) {
  // The session's tcp_stream has no read in flight now. Reading the raw socket keeps this read
  // out of the stream's timeout, which then applies to our writes only; when a write times out
  // the stream closes the socket and this read fails too.
  // NOTE: the flag is checked before each read: a read that completed with data just as the
  // session asked us to stop must not be followed by one nobody will cancel.
  while (!c->unwatch_requested && c->buffer.size() < kMaxPipelinedBytes) {
    auto [ec, n] = co_await c->stream.socket().async_read_some(
        c->buffer.prepare(4096), asio::bind_cancellation_slot(c->stop_watch.slot(), kUse));
    if (ec && c->unwatch_requested) break;  // the response finished
    if (ec) {
      c->client_gone = true;  // EOF or reset: the client left
      break;
    }
    c->buffer.commit(n);  // a pipelined request: kept for the next parse
  }
  // Leaving the loop on a full buffer (a client pipelining too much) ends disconnect
  // detection for this response; the write timeout still bounds it.
  c->watching = false;
  c->wake_timer.cancel();
}

void HttpServer::Impl::begin_watch(const std::shared_ptr<Connection>& c) {
  c->watching = true;
  c->unwatch_requested = false;
  asio::co_spawn(c->stream.get_executor(), watch_client(c), asio::detached);
}

asio::awaitable<void> HttpServer::Impl::end_watch(Connection& c) {
  c.unwatch_requested = true;
  if (c.watching) c.stop_watch.emit(asio::cancellation_type::terminal);
  while (c.watching) co_await wait_wake(c);
}

asio::awaitable<void> HttpServer::Impl::wait_wake(Connection& c) {
  c.wake_timer.expires_at(Clock::time_point::max());
  co_await c.wake_timer.async_wait(kUse);
}

void HttpServer::Impl::start_work(const std::shared_ptr<Connection>& c, PendingWork& work) {
  std::weak_ptr<Connection> weak = c;
  work.start([weak] {
    if (auto conn = weak.lock()) conn->wake();
  });
}

asio::awaitable<std::optional<HttpResponse>> HttpServer::Impl::run_deferred(
    std::shared_ptr<Connection> c, DeferredResponse& work) {
  begin_watch(c);
  start_work(c, work);
  std::optional<HttpResponse> res;
  for (;;) {
    if (c->client_gone || c->abort) break;
    if ((res = work.poll())) break;
    co_await wait_wake(*c);
  }
  if (!res) {
    work.cancel();
    if (c->client_gone) ++client_disconnects;
  }
  co_await end_watch(*c);
  co_return res;
}

asio::awaitable<bool> HttpServer::Impl::write_stream(std::shared_ptr<Connection> c,
                                                     HttpResponse& res, unsigned version,
                                                     bool keep_alive) {
  StreamBody& work = *res.stream;
  bool chunked = version >= 11;
  http::response<http::empty_body> head{static_cast<http::status>(res.status), version};
  head.set(http::field::server, "inflight");
  head.set(http::field::content_type, res.content_type);
  for (auto& [name, value] : res.headers) head.set(name, value);
  head.keep_alive(keep_alive && chunked);
  head.chunked(chunked);
  http::response_serializer<http::empty_body> serializer{head};

  begin_watch(c);
  c->writing = true;
  c->stream.expires_after(seconds(config.write_timeout_s));
  auto [ec, n] = co_await http::async_write_header(c->stream, serializer, kUse);
  c->writing = false;
  bool ok = !ec;
  if (ok) start_work(c, work);
  std::string out;
  bool done = false;
  while (ok && !done) {
    if (c->client_gone || c->abort) {
      ok = false;
      break;
    }
    out.clear();
    done = work.poll(out);
    if (!out.empty()) {
      c->writing = true;
      c->stream.expires_after(seconds(config.write_timeout_s));
      if (chunked) {
        std::tie(ec, n) =
            co_await asio::async_write(c->stream, http::make_chunk(asio::buffer(out)), kUse);
      } else {
        std::tie(ec, n) = co_await asio::async_write(c->stream, asio::buffer(out), kUse);
      }
      c->writing = false;
      if (ec) {
        c->client_gone = true;
        ok = false;
        break;
      }
    }
    if (!done && out.empty()) co_await wait_wake(*c);
  }
  if (ok && chunked) {
    c->writing = true;
    std::tie(ec, n) = co_await asio::async_write(c->stream, http::make_chunk_last(), kUse);
    c->writing = false;
    ok = !ec;
  }
  if (!done) {
    work.cancel();
    if (c->client_gone) ++client_disconnects;
  }
  co_await end_watch(*c);
  co_return ok && chunked && keep_alive;
}

// ---- public interface ----------------------------------------------------------------------

HttpServer::HttpServer(HttpServerConfig config, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(handler))) {}

HttpServer::~HttpServer() = default;

void HttpServer::listen() {
  auto& im = *impl_;
  beast::error_code ec;
  auto address = asio::ip::make_address(im.config.host, ec);
  INFLIGHT_CHECK_CODE(!ec, ErrorCode::kInvalidArgument, "invalid --host '{}': {}",
                      im.config.host, ec.message());
  tcp::endpoint endpoint{address, static_cast<unsigned short>(im.config.port)};
  im.acceptor.open(endpoint.protocol(), ec);
  if (!ec) im.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) im.acceptor.bind(endpoint, ec);
  if (!ec) im.acceptor.listen(im.config.backlog, ec);
  INFLIGHT_CHECK_CODE(!ec, ErrorCode::kInvalidArgument, "cannot listen on {}:{}: {}",
                      im.config.host, im.config.port, ec.message());
}

int HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void HttpServer::on_stop(std::function<void()> callback) {
  impl_->stop_callback = std::move(callback);
}

void HttpServer::stop() {
  asio::post(impl_->ioc, [this] { impl_->begin_stop(); });
}

void HttpServer::run() {
  auto& im = *impl_;
  if (im.config.handle_signals) {
    im.signals.add(SIGINT);
    im.signals.add(SIGTERM);
    im.signals.async_wait([&im](beast::error_code ec, int sig) {
      if (!ec) im.begin_stop();
    });
  }
  asio::co_spawn(im.ioc, im.accept_loop(), asio::detached);
  auto io_thread = [&im] {
    clockid_t clock;
    pthread_getcpuclockid(pthread_self(), &clock);
    {
      std::lock_guard lock(im.mutex);
      im.io_clocks.push_back(clock);
    }
    im.ioc.run();
    std::lock_guard lock(im.mutex);
    im.io_cpu_finished += thread_cpu_seconds(clock);
    std::erase(im.io_clocks, clock);
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, im.config.num_threads); ++i) threads.emplace_back(io_thread);
  io_thread();
  for (auto& t : threads) t.join();
}

HttpServerStats HttpServer::stats() const {
  auto& im = *impl_;
  HttpServerStats s;
  std::lock_guard lock(im.mutex);
  s.connections_open = static_cast<int64_t>(im.connections.size());
  s.connections_total = im.connections_total;
  s.requests_total = im.requests_total;
  s.client_disconnects_total = im.client_disconnects;
  s.io_cpu_seconds = im.io_cpu_finished;
  for (clockid_t clock : im.io_clocks) s.io_cpu_seconds += thread_cpu_seconds(clock);
  return s;
}

}  // namespace inflight::server
