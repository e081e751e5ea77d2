#include "bench/sse_client.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <optional>

#include "bench/sse_parser.h"
#include "bench/stream_recorder.h"
#include "core/check.h"

namespace inflight::bench {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// Body bytes handed to the SSE parser per read; a token chunk is a few hundred bytes.
constexpr size_t kReadChunk = 4096;
// How much of an error response's body goes into the record.
constexpr size_t kMaxErrorBody = 512;

http::request<http::string_body> make_request(const ConnectionPool& pool, const std::string& path,
                                              std::string body, const std::string& api_key,
                                              bool stream) {
  http::request<http::string_body> req{body.empty() ? http::verb::get : http::verb::post,
                                       pool.prefix() + path, 11};
  req.set(http::field::host, pool.host_header());
  req.set(http::field::user_agent, "inflight-bench");
  req.set(http::field::accept, stream ? "text/event-stream" : "application/json");
  if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  req.keep_alive(true);
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

// A reused keep-alive connection may have been closed by the server in the meantime; such a
// failure shows before any response byte and is worth one retry on a fresh connection.
bool is_stale_connection(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

using Parser = http::response_parser<http::buffer_body>;

// Sends `req` and reads the response header, retrying once on a fresh connection when a reused
// one turns out to be stale.
asio::awaitable<error_code> send_and_read_header(ConnectionPool& pool,
                                                 const http::request<http::string_body>& req,
                                                 tcp::socket& socket,
                                                 boost::beast::flat_buffer& buffer,
                                                 std::optional<Parser>& parser) {
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    error_code ec;
    socket = co_await pool.acquire(reused, ec);
    if (ec) co_return ec;
    buffer.clear();
    parser.emplace();
    parser->body_limit(boost::none);
    std::tie(ec, std::ignore) = co_await http::async_write(socket, req, kTuple);
    if (!ec) {
      std::tie(ec, std::ignore) = co_await http::async_read_header(socket, buffer, *parser, kTuple);
    }
    if (!ec || !reused || attempt > 0 || !is_stale_connection(ec)) co_return ec;
  }
}

// Reads what remains of the body into a string (error responses, plain requests).
asio::awaitable<error_code> read_rest(tcp::socket& socket, boost::beast::flat_buffer& buffer,
                                      Parser& parser, std::string& out, size_t limit) {
  char tmp[kReadChunk];
  while (!parser.is_done()) {
    auto& body = parser.get().body();
    body.data = tmp;
    body.size = sizeof tmp;
    auto [ec, n] = co_await http::async_read_some(socket, buffer, parser, kTuple);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return ec;
    const size_t got = sizeof tmp - body.size;
    out.append(tmp, std::min(got, limit - std::min(limit, out.size())));
  }
  co_return error_code{};
}

}  // namespace

BenchClock steady_bench_clock() {
  return [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
}

BaseUrl parse_base_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  INFLIGHT_CHECK_CODE(url.starts_with(kScheme), ErrorCode::kInvalidArgument,
                      "--base-url must start with http:// (got '{}'; TLS is not supported)", url);
  url.remove_prefix(kScheme.size());
  BaseUrl out;
  const size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  if (slash != std::string_view::npos) out.prefix = std::string(url.substr(slash));
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  const size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos) {
    out.port = std::string(authority.substr(colon + 1));
    authority = authority.substr(0, colon);
  }
  if (authority.size() > 1 && authority.front() == '[' && authority.back() == ']') {
    authority = authority.substr(1, authority.size() - 2);
  }
  out.host = std::string(authority);
  INFLIGHT_CHECK_CODE(!out.host.empty() && !out.port.empty(), ErrorCode::kInvalidArgument,
                      "--base-url '{}' has no host or port", url);
  return out;
}

ConnectionPool::ConnectionPool(asio::io_context& io, const BaseUrl& url)
    : io_(io), host_header_(url.host + ":" + url.port), prefix_(url.prefix) {
  tcp::resolver resolver(io);
  error_code ec;
  const auto results = resolver.resolve(url.host, url.port, ec);
  INFLIGHT_CHECK_CODE(!ec && !results.empty(), ErrorCode::kNotFound, "cannot resolve {}:{}: {}",
                      url.host, url.port, ec.message());
  for (const auto& entry : results) endpoints_.push_back(entry.endpoint());
}

asio::awaitable<ConnectionPool::Socket> ConnectionPool::acquire(bool& reused, error_code& ec) {
  ec = {};
  if (!idle_.empty()) {
    Socket s = std::move(idle_.back());
    idle_.pop_back();
    reused = true;
    co_return s;
  }
  reused = false;
  Socket s(io_);
  std::tie(ec, std::ignore) = co_await asio::async_connect(s, endpoints_, kTuple);
  if (!ec) s.set_option(tcp::no_delay(true), ec);
  co_return s;
}

void ConnectionPool::release(Socket socket) {
  if (socket.is_open()) idle_.push_back(std::move(socket));
}

asio::awaitable<void> stream_request(ConnectionPool& pool, const StreamRequest& request,
                                     StreamRecorder& recorder, const BenchClock& clock) {
  recorder.start(clock());
  const auto req = make_request(pool, request.path, request.body, request.api_key, true);
  tcp::socket socket(pool.executor());
  boost::beast::flat_buffer buffer;
  std::optional<Parser> parser;
  error_code ec = co_await send_and_read_header(pool, req, socket, buffer, parser);
  if (ec) {
    recorder.fail("request failed: " + ec.message());
    co_return;
  }
  const unsigned status = parser->get().result_int();
  if (status != 200) {
    std::string body;
    ec = co_await read_rest(socket, buffer, *parser, body, kMaxErrorBody);
    recorder.fail(fmt::format("HTTP {}: {}", status, body));
    co_return;
  }
  SseParser sse([&](const SseEvent& event) { recorder.on_event(event, clock()); });
  char tmp[kReadChunk];
  while (!parser->is_done()) {
    auto& body = parser->get().body();
    body.data = tmp;
    body.size = sizeof tmp;
    std::tie(ec, std::ignore) = co_await http::async_read_some(socket, buffer, *parser, kTuple);
    if (ec == http::error::need_buffer) ec = {};
    sse.feed(std::string_view(tmp, sizeof tmp - body.size));
    if (ec) {
      recorder.fail("stream broken: " + ec.message());
      co_return;
    }
    if (recorder.done()) co_return;  // an error event ended it; drop the connection
  }
  sse.finish();
  recorder.finish();
  if (parser->keep_alive()) pool.release(std::move(socket));
}

asio::awaitable<std::pair<int, std::string>> simple_request(ConnectionPool& pool, std::string path,
                                                            std::string body, std::string api_key) {
  const auto req = make_request(pool, path, std::move(body), api_key, false);
  tcp::socket socket(pool.executor());
  boost::beast::flat_buffer buffer;
  std::optional<Parser> parser;
  error_code ec = co_await send_and_read_header(pool, req, socket, buffer, parser);
  std::string out;
  if (!ec) ec = co_await read_rest(socket, buffer, *parser, out, std::string::npos);
  if (ec) co_return std::pair<int, std::string>{0, ec.message()};
  const int status = static_cast<int>(parser->get().result_int());
  if (parser->keep_alive()) pool.release(std::move(socket));
  co_return std::pair<int, std::string>{status, std::move(out)};
}

}  // namespace inflight::bench
