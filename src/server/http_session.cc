// The Beast transport: one connection's requests, read, checked, dispatched and answered.
#include <array>
#include <chrono>
#include <optional>

#include "core/logging.h"
#include "server/http_responses.h"
#include "server/http_transport.h"
#include "server/request_framing.h"

namespace inflight::server {

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

void HttpServer::Impl::log_access(Connection& c, std::string_view method, std::string_view target,
                                  std::string_view outcome,
                                  const std::function<std::string()>& details,
                                  std::chrono::steady_clock::time_point start) const {
  if (!config.access_log) return;
  beast::error_code ec;
  const auto peer = c.stream.socket().remote_endpoint(ec);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  INFLIGHT_LOG_INFO("{}:{} \"{} {}\" {} {}{}{:.1f}ms", ec ? "-" : peer.address().to_string(),
                    ec ? 0 : peer.port(), method, target, outcome, details ? details() : "",
                    details ? " " : "", ms);
}

namespace {

// The head's fields, names lower-cased, in the order sent.
HttpHeaders header_fields(const http::request<http::string_body>& msg) {
  HttpHeaders fields;
  for (const auto& field : msg) {
    std::string name(field.name_string());
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    fields.emplace_back(std::move(name), std::string(field.value()));
  }
  return fields;
}

HttpRequest to_request(http::request<http::string_body>& msg, HttpHeaders fields) {
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  auto q = req.target.find('?');
  req.path = q == std::string::npos ? req.target : req.target.substr(0, q);
  req.headers = std::move(fields);
  req.body = std::move(msg.body());
  return req;
}

// What a failed read of a request becomes: an error answer (then the connection is closed),
// or nullopt for a silent close (the client left, the server is stopping, or nothing of a
// request arrived in time). `partial`: some bytes of a request had arrived.
std::optional<HttpResponse> read_error(beast::error_code ec, bool timed_out, bool partial) {
  if (ec == http::error::body_limit) return error_response(413, "request body too large");
  if (ec == http::error::header_limit) {
    return error_response(431, "request header fields too large");
  }
  if (timed_out) {
    if (!partial) return std::nullopt;
    return error_response(408, "the request did not arrive in time");
  }
  if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::eof ||
      ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
      ec == asio::error::bad_descriptor || !partial) {
    return std::nullopt;
  }
  return error_response(400, "malformed HTTP request");
}

}  // namespace

void HttpServer::Impl::arm_read_deadline(const std::shared_ptr<Connection>& c, double timeout_s) {
  c->stream.expires_never();
  c->read_timed_out = false;
  c->read_timer.expires_after(seconds(timeout_s));
  c->read_timer.async_wait([c, epoch = c->read_epoch](beast::error_code ec) {
    if (ec || c->read_epoch != epoch) return;
    c->read_timed_out = true;
    c->stream.socket().cancel(ec);
  });
}

void HttpServer::Impl::end_read(Connection& c) {
  ++c.read_epoch;
  c.read_timer.cancel();
}

// The checks made on a head before its body is read.
std::optional<HttpResponse> HttpServer::Impl::check_head(unsigned version,
                                                         const HttpHeaders& fields) const {
  if (auto why = framing_error(version, fields)) return error_response(400, *why);
  const std::string* host = nullptr;
  for (const auto& [name, value] : fields) {
    if (name == "host") host = &value;
  }
  if (!host_check.allows(host, acceptor.local_endpoint().port())) {
    return error_response(400, "Invalid host header");
  }
  return std::nullopt;
}

asio::awaitable<void> HttpServer::Impl::session(std::shared_ptr<Connection> c) {
  Connection& conn = *c;
  int64_t served = 0;
  while (!stopping) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(static_cast<uint64_t>(config.max_body_bytes));
    parser.header_limit(static_cast<uint32_t>(config.max_header_bytes));
    bool fresh = served == 0 || conn.buffer.size() > 0;
    arm_read_deadline(c, fresh ? config.read_timeout_s : config.idle_timeout_s);
    auto [ec, n] = co_await http::async_read_header(conn.stream, conn.buffer, parser, kUse);
    end_read(conn);
    const auto start = std::chrono::steady_clock::now();
    std::optional<HttpResponse> early;
    HttpHeaders fields;
    if (ec) {
      early = read_error(ec, conn.read_timed_out, parser.got_some() || conn.buffer.size() > 0);
      if (!early) break;  // the client closed, went idle too long, or the server is stopping
    } else {
      fields = header_fields(parser.get());
      early = check_head(parser.get().version(), fields);
    }
    if (!early) {
      auto& head = parser.get();
      if (beast::iequals(head[http::field::expect], "100-continue")) {
        http::response<http::empty_body> cont{http::status::continue_, head.version()};
        conn.stream.expires_after(seconds(config.write_timeout_s));
        auto [wec, wn] = co_await http::async_write(conn.stream, cont, kUse);
        if (wec) break;
      }
      arm_read_deadline(c, config.read_timeout_s);
      std::tie(ec, n) = co_await http::async_read(conn.stream, conn.buffer, parser, kUse);
      end_read(conn);
      if (ec) {
        early = read_error(ec, conn.read_timed_out, true);
        if (!early) break;
      }
    }
    if (early) {
      // The rest of the request was not read: answer, then close without resetting.
      conn.stream.expires_after(seconds(config.write_timeout_s));
      co_await write_response(conn, *early, 11, false);
      const bool head_read = !ec || parser.is_header_done();
      log_access(conn, head_read ? std::string_view(parser.get().method_string()) : "-",
                 head_read ? std::string_view(parser.get().target()) : "-",
                 std::to_string(early->status), nullptr, start);
      co_await linger_close(conn);
      break;
    }

    ++served;
    ++requests_total;
    auto& msg = parser.get();
    unsigned version = msg.version();
    bool keep_alive = msg.keep_alive();
    HttpRequest req = to_request(msg, std::move(fields));
    const bool head_only = req.method == "HEAD";
    conn.busy = true;
    std::optional<HttpResponse> preflight = cors.preflight(req);
    HttpResponse res = preflight ? std::move(*preflight) : dispatch(req);
    std::function<std::string()> details = std::move(res.log_details);
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
    if (head_only && res.stream) {
      res.stream->cancel();  // no body goes out
      res.stream.reset();
    }
    for (auto& header : cors.response_headers(req)) res.headers.push_back(std::move(header));
    keep_alive = keep_alive && !stopping && !conn.abort;
    if (ok) {
      if (res.stream) {
        ok = co_await write_stream(c, res, version, keep_alive);
      } else {
        conn.stream.expires_after(seconds(config.write_timeout_s));
        conn.writing = true;
        ok = co_await write_response(conn, res, version, keep_alive, head_only);
        conn.writing = false;
      }
    }
    conn.busy = false;
    log_access(conn, req.method, req.target,
               ok ? std::to_string(res.status)
                  : std::string(conn.client_gone ? "client-disconnected" : "write-failed"),
               details, start);
    if (!ok || !keep_alive) break;
  }
  end_read(conn);
  beast::error_code ignored;
  conn.stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  conn.stream.socket().close(ignored);
  forget(c.get());
}

asio::awaitable<bool> HttpServer::Impl::write_response(Connection& c, HttpResponse& res,
                                                       unsigned version, bool keep_alive,
                                                       bool head_only) {
  const auto status = static_cast<http::status>(res.status);
  beast::error_code ec;
  size_t n = 0;
  if (head_only) {
    // The GET's head, Content-Length included, and no body.
    http::response<http::empty_body> msg{status, version};
    set_head(msg, res);
    msg.keep_alive(keep_alive);
    msg.content_length(res.body.size());
    std::tie(ec, n) = co_await http::async_write(c.stream, msg, kUse);
  } else {
    http::response<http::string_body> msg{status, version};
    set_head(msg, res);
    msg.body() = std::move(res.body);
    msg.keep_alive(keep_alive);
    msg.prepare_payload();
    std::tie(ec, n) = co_await http::async_write(c.stream, msg, kUse);
  }
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
}  // namespace inflight::server
