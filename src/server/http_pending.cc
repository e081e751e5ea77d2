// The Beast transport: deferred and streamed responses, and client-disconnect detection.
#include "server/http_transport.h"

namespace inflight::server {

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
  set_head(head, res);
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
  bool aborted = false;
  while (ok && !done) {
    if (c->client_gone) {
      ok = false;
      break;
    }
    if (c->abort && !aborted) {
      aborted = true;  // the body keeps coming until it ends with its final events
      work.abort();
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
}  // namespace inflight::server
