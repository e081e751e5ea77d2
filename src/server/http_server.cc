// The Beast transport: accept loop, start and shutdown (see http_transport.h for the layout).
#include "server/http_server.h"

#include <pthread.h>
#include <time.h>

#include <thread>

#include "core/check.h"
#include "core/logging.h"
#include "server/http_transport.h"

namespace inflight::server {

namespace {

double thread_cpu_seconds(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

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
    // Nothing left to wait for: the deadline and a second signal no longer matter.
    asio::post(control, [this] {
      beast::error_code ec;
      shutdown_timer.cancel();
      signals.cancel(ec);
    });
  }
}

// SIGINT/SIGTERM/SIGUSR1: the first begins a graceful stop, a second one during the drain aborts at
// once (as the deadline would).
void HttpServer::Impl::wait_signal() {
  signals.async_wait([this](beast::error_code ec, int) {
    if (ec) return;
    if (!stopping) {
      begin_stop();
    } else {
      INFLIGHT_LOG_INFO("server: second signal, aborting in-flight requests now");
      abort_all();
    }
  });
}

// Runs on `control`: stop accepting, close idle connections, arm the deadline after which
// pending work is aborted.
void HttpServer::Impl::begin_stop() {
  if (stopping.exchange(true)) return;
  INFLIGHT_LOG_INFO("server: stopping (up to {:.1f} s for in-flight requests)",
                    config.shutdown_timeout_s);
  beast::error_code ec;
  acceptor.close(ec);
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
  if (none) {
    signals.cancel(ec);
    return;
  }
  if (config.handle_signals) wait_signal();
  shutdown_timer.expires_after(seconds(config.shutdown_timeout_s));
  shutdown_timer.async_wait([this](beast::error_code ec) {
    if (ec) return;  // every connection finished in time, or a second signal came first
    abort_all();
  });
}

// Runs on `control`. Whole responses still pending are answered 503; streams are aborted and
// end with their final events. Connections that have not ended within kAbortGrace (a client
// that stopped reading, an engine that does not answer) are abandoned.
void HttpServer::Impl::abort_all() {
  if (aborted) return;
  aborted = true;
  for_each_connection([](const std::shared_ptr<Connection>& c) {
    asio::post(c->stream.get_executor(), [c] {
      c->abort = true;
      c->wake_timer.cancel();
    });
  });
  shutdown_timer.expires_after(kAbortGrace);
  shutdown_timer.async_wait([this](beast::error_code ec) {
    if (!ec) ioc.stop();
  });
}
// ---- public interface ----------------------------------------------------------------------

HttpServer::HttpServer(HttpServerConfig config, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(handler))) {}

HttpServer::~HttpServer() = default;

void HttpServer::listen() {
  auto& im = *impl_;
  beast::error_code ec;
  auto address = asio::ip::make_address(im.config.host, ec);
  INFLIGHT_CHECK_CODE(!ec, ErrorCode::kInvalidArgument, "invalid --host '{}': {}", im.config.host,
                      ec.message());
  tcp::endpoint endpoint{address, static_cast<unsigned short>(im.config.port)};
  im.acceptor.open(endpoint.protocol(), ec);
  if (!ec) im.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) im.acceptor.bind(endpoint, ec);
  if (!ec) im.acceptor.listen(im.config.backlog, ec);
  INFLIGHT_CHECK_CODE(!ec, ErrorCode::kInvalidArgument, "cannot listen on {}:{}: {}",
                      im.config.host, im.config.port, ec.message());
}

int HttpServer::port() const {
  return impl_->acceptor.local_endpoint().port();
}

void HttpServer::on_stop(std::function<void()> callback) {
  impl_->stop_callback = std::move(callback);
}

void HttpServer::stop() {
  asio::post(impl_->control, [this] { impl_->begin_stop(); });
}

void HttpServer::run() {
  auto& im = *impl_;
  if (im.config.handle_signals) {
    im.signals.add(SIGINT);
    im.signals.add(SIGTERM);
    im.signals.add(SIGUSR1);  // what mpirun forwards to the ranks of a parallel job
    im.wait_signal();
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
