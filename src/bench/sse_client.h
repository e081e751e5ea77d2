// The HTTP side of `inflight bench serve`: plain HTTP/1.1 over TCP (no TLS) with Boost.Beast
// and C++20 coroutines, one coroutine per request on a single-threaded io_context, so that one
// process drives thousands of concurrent streams.
//
// NOTE: this header brings in Asio; include it only from the few .cc files that drive I/O.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace inflight::bench {

class StreamRecorder;

// The benchmark clock: seconds on a monotonic clock. Tests substitute a scripted one.
using BenchClock = std::function<double()>;
BenchClock steady_bench_clock();

// "http://host:port[/prefix]" -> its parts. Throws kInvalidArgument for anything else (https
// included: put a TLS-terminating proxy in front).
struct BaseUrl {
  std::string host;
  std::string port = "80";
  std::string prefix;  // without a trailing '/'; joined before each endpoint path
};
BaseUrl parse_base_url(std::string_view url);

// Keep-alive connections to one server, reused across requests.
class ConnectionPool {
 public:
  using Socket = boost::asio::ip::tcp::socket;

  // Resolves the host at once (blocking); throws kNotFound when it cannot.
  ConnectionPool(boost::asio::io_context& io, const BaseUrl& url);

  // An idle connection if one is left, else a new one. `reused` says which.
  boost::asio::awaitable<Socket> acquire(bool& reused, boost::system::error_code& ec);
  void release(Socket socket);

  boost::asio::io_context::executor_type executor() { return io_.get_executor(); }
  const std::string& host_header() const { return host_header_; }
  const std::string& prefix() const { return prefix_; }

 private:
  boost::asio::io_context& io_;
  std::vector<boost::asio::ip::tcp::endpoint> endpoints_;
  std::vector<Socket> idle_;
  std::string host_header_;
  std::string prefix_;
};

// One POST whose response is an SSE stream.
struct StreamRequest {
  std::string path;  // e.g. "/v1/completions"; the pool's prefix goes in front
  std::string body;  // JSON
  std::string api_key;
};

// Sends the request and feeds every SSE event to the recorder, stamped with clock() when it was
// parsed. The clock is read exactly once when the request starts and once per event, nothing
// else (tests script it on that contract). Never throws: failures end in recorder.fail().
boost::asio::awaitable<void> stream_request(ConnectionPool& pool, const StreamRequest& request,
                                            StreamRecorder& recorder, const BenchClock& clock);

// A plain request (GET when body is empty, else POST); returns (status, body). status is 0 and
// body the error when the exchange itself failed.
boost::asio::awaitable<std::pair<int, std::string>> simple_request(ConnectionPool& pool,
                                                                   std::string path,
                                                                   std::string body,
                                                                   std::string api_key);

}  // namespace inflight::bench
