// The Beast transport against raw sockets: keep-alive, pipelining, limits, malformed input,
// chunked streams, deferred responses, client disconnects and graceful shutdown.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace inflight::server {
namespace {

using namespace std::chrono_literals;

// Produces `limit` lines ("tick N\n"), one every `period`, from its own thread.
class TickStream final : public StreamBody {
 public:
  TickStream(int limit, std::chrono::milliseconds period, std::atomic<int>* cancelled)
      : limit_(limit), period_(period), cancelled_(cancelled) {}
  ~TickStream() override {
    stop_ = true;
    if (ticker_.joinable()) ticker_.join();
  }
  void start(std::function<void()> wake) override {
    ticker_ = std::thread([this, wake = std::move(wake)] {
      while (!stop_ && ticks_ < limit_) {
        std::this_thread::sleep_for(period_);
        ++ticks_;
        wake();
      }
    });
  }
  bool poll(std::string& out) override {
    if (aborted_) {
      out += "aborted\n";
      return true;
    }
    int now = ticks_;
    for (; sent_ < now; ++sent_) out += "tick " + std::to_string(sent_) + "\n";
    return sent_ == limit_;
  }
  // Ends after the ticks sent so far, with a last "aborted" line.
  void abort() override {
    stop_ = true;
    aborted_ = true;
  }
  void cancel() override {
    stop_ = true;
    ++*cancelled_;
  }

 private:
  int limit_;
  std::chrono::milliseconds period_;
  std::atomic<int>* cancelled_;
  std::atomic<int> ticks_{0};
  std::atomic<bool> stop_{false};
  bool aborted_ = false;
  int sent_ = 0;
  std::thread ticker_;
};

// Ready after `delay`.
class DelayedResponse final : public DeferredResponse {
 public:
  DelayedResponse(std::chrono::milliseconds delay, std::atomic<int>* cancelled)
      : delay_(delay), cancelled_(cancelled) {}
  ~DelayedResponse() override {
    if (timer_.joinable()) timer_.join();
  }
  void start(std::function<void()> wake) override {
    timer_ = std::thread([this, wake = std::move(wake)] {
      auto until = std::chrono::steady_clock::now() + delay_;
      while (!stop_ && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
      ready_ = true;
      wake();
    });
  }
  std::optional<HttpResponse> poll() override {
    if (!ready_ || stop_) return std::nullopt;
    HttpResponse res;
    res.body = "late";
    return res;
  }
  void cancel() override {
    stop_ = true;
    ++*cancelled_;
  }

 private:
  std::chrono::milliseconds delay_;
  std::atomic<int>* cancelled_;
  std::atomic<bool> ready_{false}, stop_{false};
  std::thread timer_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerConfig config;
    config.port = 0;
    config.num_threads = 2;
    config.max_body_bytes = 1024;
    config.read_timeout_s = 1;
    config.idle_timeout_s = 2;
    config.shutdown_timeout_s = 1;
    config.handle_signals = false;
    config.allowed_hosts = {"*"};  // the requests below send "Host: x"
    server_ = std::make_unique<HttpServer>(config, [this](const HttpRequest& r) {
      return handle(r);
    });
    server_->listen();
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    server_->stop();
    thread_.join();
  }

  HttpResponse handle(const HttpRequest& r) {
    HttpResponse res;
    if (r.path == "/echo") {
      res.content_type = "text/plain";
      res.body = r.method + " " + r.target + " " + r.body;
    } else if (r.path == "/stream") {
      res.content_type = "text/event-stream";
      res.stream = std::make_shared<TickStream>(3, 5ms, &cancelled_);
    } else if (r.path == "/endless") {
      res.content_type = "text/event-stream";
      res.stream = std::make_shared<TickStream>(1 << 30, 5ms, &cancelled_);
    } else if (r.path == "/deferred") {
      res.deferred = std::make_shared<DelayedResponse>(50ms, &cancelled_);
    } else if (r.path == "/slow") {
      res.deferred = std::make_shared<DelayedResponse>(60s, &cancelled_);
    } else {
      res.status = 404;
    }
    return res;
  }

  int connect_client() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    return fd;
  }

  static void send_all(int fd, const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }

  // Reads until `done(buffer)` or EOF or the timeout.
  static std::string read_until(int fd, const std::function<bool(const std::string&)>& done,
                                std::chrono::milliseconds timeout = 3000ms) {
    std::string buf;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done(buf) && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      char chunk[4096];
      ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      buf.append(chunk, static_cast<size_t>(n));
    }
    return buf;
  }

  static size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  }

  // True when the server closes the connection (EOF or reset) within 2 s, sending nothing.
  static bool closed(int fd) {
    auto deadline = std::chrono::steady_clock::now() + 2000ms;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      char c;
      return ::recv(fd, &c, 1, 0) <= 0;
    }
    return false;
  }

  // Waits for `cond` up to `timeout`.
  static bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (cond()) return true;
      std::this_thread::sleep_for(5ms);
    }
    return cond();
  }

  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::atomic<int> cancelled_{0};
};

TEST_F(HttpServerTest, KeepAliveServesSeveralRequests) {
  int fd = connect_client();
  for (int i = 0; i < 3; ++i) {
    send_all(fd, "POST /echo?i=" + std::to_string(i) +
                     " HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
    std::string want = "POST /echo?i=" + std::to_string(i) + " hi";
    std::string got = read_until(fd, [&](const std::string& b) { return b.ends_with(want); });
    EXPECT_TRUE(got.starts_with("HTTP/1.1 200 OK\r\n")) << got;
    EXPECT_TRUE(got.ends_with(want)) << got;
  }
  ::close(fd);
}

TEST_F(HttpServerTest, PipelinedRequestsAnswerInOrder) {
  int fd = connect_client();
  send_all(fd,
           "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na"
           "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"
           "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nb");
  std::string got = read_until(fd, [](const std::string& b) { return b.ends_with("POST /echo b"); });
  size_t a = got.find("POST /echo a"), ticks = got.find("tick 2\n"), b = got.find("POST /echo b");
  ASSERT_NE(a, std::string::npos) << got;
  ASSERT_NE(ticks, std::string::npos) << got;
  ASSERT_NE(b, std::string::npos) << got;
  EXPECT_LT(a, ticks);
  EXPECT_LT(ticks, b);
  ::close(fd);
}

TEST_F(HttpServerTest, ChunkedStream) {
  int fd = connect_client();
  send_all(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string got = read_until(fd, [](const std::string& b) { return b.ends_with("0\r\n\r\n"); });
  EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
  EXPECT_NE(got.find("Content-Type: text/event-stream"), std::string::npos) << got;
  EXPECT_EQ(count(got, "tick "), 3u) << got;
  EXPECT_EQ(cancelled_, 0);
  ::close(fd);
}

TEST_F(HttpServerTest, Http10StreamEndsWithClose) {
  int fd = connect_client();
  send_all(fd, "GET /stream HTTP/1.0\r\n\r\n");
  std::string got = read_until(fd, [](const std::string&) { return false; });
  EXPECT_TRUE(got.starts_with("HTTP/1.0 200")) << got;
  EXPECT_EQ(got.find("chunked"), std::string::npos) << got;
  EXPECT_TRUE(got.ends_with("tick 0\ntick 1\ntick 2\n")) << got;
  ::close(fd);
}

TEST_F(HttpServerTest, DeferredResponse) {
  int fd = connect_client();
  send_all(fd, "GET /deferred HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string got = read_until(fd, [](const std::string& b) { return b.ends_with("late"); });
  EXPECT_TRUE(got.starts_with("HTTP/1.1 200")) << got;
  EXPECT_NE(got.find("Content-Length: 4"), std::string::npos) << got;
  ::close(fd);
}

TEST_F(HttpServerTest, DisconnectCancelsStreamAndDeferred) {
  int fd = connect_client();
  send_all(fd, "GET /endless HTTP/1.1\r\nHost: x\r\n\r\n");
  read_until(fd, [](const std::string& b) { return b.find("tick 3") != std::string::npos; });
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return cancelled_ == 1; }, 1000ms));

  fd = connect_client();
  send_all(fd, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(50ms);
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return cancelled_ == 2; }, 1000ms));
  EXPECT_TRUE(eventually([&] { return server_->stats().client_disconnects_total == 2; }, 1000ms));
  EXPECT_TRUE(eventually([&] { return server_->stats().connections_open == 0; }, 1000ms));
}

TEST_F(HttpServerTest, BodyTooLargeIs413) {
  int fd = connect_client();
  send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" +
                   std::string(5000, 'x'));
  std::string got = read_until(fd, [](const std::string& b) { return b.ends_with("}}"); });
  EXPECT_TRUE(got.starts_with("HTTP/1.1 413")) << got;
  EXPECT_NE(got.find("\"code\":413"), std::string::npos) << got;
  EXPECT_TRUE(closed(fd));
  ::close(fd);

  // Chunked bodies are limited too.
  fd = connect_client();
  std::string chunk(800, 'y');
  send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n320\r\n" +
                   chunk + "\r\n320\r\n" + chunk + "\r\n0\r\n\r\n");
  got = read_until(fd, [](const std::string& b) { return b.ends_with("}}"); });
  EXPECT_TRUE(got.starts_with("HTTP/1.1 413")) << got;
  ::close(fd);
}

TEST_F(HttpServerTest, MalformedRequestIs400) {
  for (std::string bad : {"GARBAGE\r\n\r\n", "GET / HTTP/9.9\r\n\r\n",
                          "POST /echo HTTP/1.1\r\nContent-Length: abc\r\n\r\n"}) {
    int fd = connect_client();
    send_all(fd, bad);
    std::string got = read_until(fd, [](const std::string& b) { return b.ends_with("}}"); });
    EXPECT_TRUE(got.starts_with("HTTP/1.1 400")) << bad << " -> " << got;
    ::close(fd);
  }
  // Still serving.
  int fd = connect_client();
  send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_TRUE(read_until(fd, [](const std::string& b) { return b.ends_with(" ok"); })
                  .ends_with(" ok"));
  ::close(fd);
}

TEST_F(HttpServerTest, IncompleteRequestTimesOut) {
  // read_timeout_s = 1: a request whose body never completes is answered 408, then closed.
  int fd = connect_client();
  auto start = std::chrono::steady_clock::now();
  send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
  std::string got = read_until(fd, [](const std::string& b) { return b.ends_with("}}"); });
  EXPECT_TRUE(got.starts_with("HTTP/1.1 408")) << got;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1900ms);
  EXPECT_TRUE(closed(fd));
  ::close(fd);
  // So is half a head.
  fd = connect_client();
  send_all(fd, "GET /echo HTTP/1.1\r\nHost: x\r\n");
  got = read_until(fd, [](const std::string& b) { return b.ends_with("}}"); });
  EXPECT_TRUE(got.starts_with("HTTP/1.1 408")) << got;
  ::close(fd);
  // So is a connection that never sends anything.
  fd = connect_client();
  EXPECT_TRUE(closed(fd));
  ::close(fd);
}

TEST_F(HttpServerTest, ExpectContinue) {
  int fd = connect_client();
  send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
  std::string got = read_until(fd, [](const std::string& b) { return b.find("100 Continue") !=
                                                                     std::string::npos; });
  EXPECT_TRUE(got.starts_with("HTTP/1.1 100 Continue")) << got;
  send_all(fd, "abc");
  got = read_until(fd, [](const std::string& b) { return b.ends_with("abc"); });
  EXPECT_TRUE(got.ends_with("POST /echo abc")) << got;
  ::close(fd);
}

TEST_F(HttpServerTest, GracefulStopFinishesInFlightThenAbortsTheRest) {
  int quick = connect_client();
  send_all(quick, "GET /deferred HTTP/1.1\r\nHost: x\r\n\r\n");
  int slow = connect_client();
  send_all(slow, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
  int idle = connect_client();
  std::this_thread::sleep_for(20ms);
  server_->stop();
  // In flight: answered, then closed.
  std::string got = read_until(quick, [](const std::string& b) { return b.ends_with("late"); });
  EXPECT_TRUE(got.starts_with("HTTP/1.1 200")) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  // Past the 1 s deadline: cancelled with 503.
  got = read_until(slow, [](const std::string& b) { return b.ends_with("}}"); }, 3000ms);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 503")) << got;
  EXPECT_GE(cancelled_, 1);
  // Idle: closed at once.
  EXPECT_TRUE(closed(idle));
  ::close(quick);
  ::close(slow);
  ::close(idle);
  thread_.join();
  thread_ = std::thread([] {});  // TearDown's stop() and join() have nothing left to do
}

TEST_F(HttpServerTest, StopAbortsStreamsWithTheirEnding) {
  int fd = connect_client();
  send_all(fd, "GET /endless HTTP/1.1\r\nHost: x\r\n\r\n");
  read_until(fd, [](const std::string& b) { return b.find("tick 1") != std::string::npos; });
  server_->stop();
  // Past the 1 s deadline: the stream's own ending, then the terminating chunk.
  std::string got = read_until(fd, [](const std::string& b) { return b.ends_with("0\r\n\r\n"); },
                               4000ms);
  EXPECT_NE(got.find("aborted\n"), std::string::npos) << got;
  EXPECT_TRUE(got.ends_with("\r\n0\r\n\r\n")) << got;
  EXPECT_TRUE(closed(fd));
  ::close(fd);
  thread_.join();
  thread_ = std::thread([] {});
}

TEST_F(HttpServerTest, HeadSendsNoBody) {
  int fd = connect_client();
  send_all(fd, "HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\nGET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string got = read_until(fd, [](const std::string& b) { return b.ends_with("GET /echo "); });
  // The HEAD answer's Content-Length is the GET's ("HEAD /echo "), and no body follows it.
  EXPECT_TRUE(got.starts_with("HTTP/1.1 200")) << got;
  EXPECT_NE(got.find("Content-Length: 11\r\n\r\nHTTP/1.1 200"), std::string::npos) << got;
  ::close(fd);
}

TEST_F(HttpServerTest, AmbiguousFramingIs400AndCloses) {
  for (std::string bad : {
           "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
           "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
           "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n",
           "POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
           "GET /echo HTTP/1.1\r\n\r\n",
           "GET /echo HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"}) {
    int fd = connect_client();
    send_all(fd, bad);
    std::string got = read_until(fd, [](const std::string& b) { return b.ends_with("}}"); });
    EXPECT_TRUE(got.starts_with("HTTP/1.1 400")) << bad << " -> " << got;
    EXPECT_EQ(count(got, "Server: inflight"), 1u) << got;  // one answer: nothing smuggled
    EXPECT_TRUE(closed(fd)) << bad;
    ::close(fd);
  }
}

}  // namespace
}  // namespace inflight::server
