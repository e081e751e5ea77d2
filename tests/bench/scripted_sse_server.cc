#include "scripted_sse_server.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

namespace inflight::bench::testing {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

namespace {

std::string http_chunk(const std::string& payload) {
  return fmt::format("{:x}\r\n{}\r\n", payload.size(), payload);
}

std::string sse_event(const std::string& data) {
  return "data: " + data + "\n\n";
}

constexpr const char* kSseHeader =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n";

}  // namespace

ScriptedResponse sse_response(const std::vector<std::string>& events, bool close_after) {
  ScriptedResponse r;
  r.close_after = close_after;
  r.pieces.push_back({std::string(kSseHeader) + (close_after ? "Connection: close\r\n\r\n"
                                                             : "Connection: keep-alive\r\n\r\n")});
  for (const auto& e : events) r.pieces.push_back({http_chunk(sse_event(e))});
  r.pieces.push_back({"0\r\n\r\n"});
  return r;
}

ScriptedResponse error_response(int status, const std::string& message) {
  const std::string body = nlohmann::json{{"error", {{"message", message}}}}.dump();
  ScriptedResponse r;
  r.pieces.push_back(
      {fmt::format("HTTP/1.1 {} Error\r\nContent-Type: application/json\r\n"
                   "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
                   status, body.size(), body)});
  return r;
}

std::string completion_chunk(const std::string& text, const std::string& finish_reason) {
  nlohmann::json choice = {{"index", 0}, {"text", text}, {"finish_reason", nullptr}};
  if (!finish_reason.empty()) choice["finish_reason"] = finish_reason;
  return nlohmann::json{
      {"id", "cmpl-1"}, {"object", "text_completion"}, {"model", "mock"}, {"choices", {choice}}}
      .dump();
}

std::string chat_chunk(const std::string& content, bool role_only) {
  nlohmann::json delta = role_only ? nlohmann::json{{"role", "assistant"}, {"content", ""}}
                                   : nlohmann::json{{"content", content}};
  return nlohmann::json{{"id", "chatcmpl-1"},
                        {"object", "chat.completion.chunk"},
                        {"model", "mock"},
                        {"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}}}}}
      .dump();
}

std::string usage_chunk(int32_t prompt_tokens, int32_t completion_tokens) {
  return nlohmann::json{{"id", "cmpl-1"},
                        {"choices", nlohmann::json::array()},
                        {"usage",
                         {{"prompt_tokens", prompt_tokens},
                          {"completion_tokens", completion_tokens},
                          {"total_tokens", prompt_tokens + completion_tokens}}}}
      .dump();
}

struct ScriptedSseServer::Impl {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread thread;
  bool synthetic_mode = false;
  SyntheticStreams synthetic;
  std::vector<std::string> synthetic_chunks;  // pre-built HTTP chunks
  std::string synthetic_tail;
  std::vector<ScriptedResponse> responses;
  std::mutex mu;
  size_t next_response = 0;
  std::vector<std::string> bodies;
  std::vector<std::string> targets;
  std::atomic<int64_t> num_connections{0};

  void start() {
    acceptor.open(tcp::v4());
    acceptor.set_option(asio::socket_base::reuse_address(true));
    acceptor.bind({asio::ip::make_address("127.0.0.1"), 0});
    acceptor.listen(asio::socket_base::max_listen_connections);
    asio::co_spawn(io, accept_loop(), asio::detached);
    thread = std::thread([this] { io.run(); });
  }

  void build_synthetic() {
    const std::string text(static_cast<size_t>(synthetic.tokens_per_chunk), 'x');
    for (int32_t i = 0; i < synthetic.num_chunks; ++i) {
      synthetic_chunks.push_back(http_chunk(sse_event(completion_chunk(text))));
    }
    synthetic_tail =
        http_chunk(sse_event(usage_chunk(8, synthetic.num_chunks * synthetic.tokens_per_chunk))) +
        http_chunk(sse_event("[DONE]")) + "0\r\n\r\n";
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(kTuple);
      if (ec) co_return;
      ++num_connections;
      asio::co_spawn(io, serve(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> serve(tcp::socket socket) {
    boost::system::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    boost::beast::flat_buffer buffer;
    asio::steady_timer timer(io);
    for (;;) {
      http::request<http::string_body> req;
      std::tie(ec, std::ignore) = co_await http::async_read(socket, buffer, req, kTuple);
      if (ec) co_return;
      if (synthetic_mode) {
        if (!co_await serve_synthetic(socket, timer, req)) co_return;
        continue;
      }
      ScriptedResponse response = error_response(500, "no scripted response left");
      {
        std::lock_guard<std::mutex> lock(mu);
        bodies.push_back(req.body());
        targets.push_back(std::string(req.target()));
        if (next_response < responses.size()) response = responses[next_response++];
      }
      for (const auto& piece : response.pieces) {
        if (piece.delay_before.count() > 0) {
          timer.expires_after(piece.delay_before);
          co_await timer.async_wait(kTuple);
        }
        std::tie(ec, std::ignore) =
            co_await asio::async_write(socket, asio::buffer(piece.bytes), kTuple);
        if (ec) co_return;
      }
      if (response.close_after) {
        socket.shutdown(tcp::socket::shutdown_both, ec);
        co_return;
      }
    }
  }

  // Returns whether the connection stays open.
  asio::awaitable<bool> serve_synthetic(tcp::socket& socket, asio::steady_timer& timer,
                                        const http::request<http::string_body>& req) {
    boost::system::error_code ec;
    if (req.method() == http::verb::get) {
      static const std::string kModels =
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n"
          "{\"object\":\"list\",\"data\":[{\"id\":\"mock\"}]}";
      std::tie(ec, std::ignore) = co_await asio::async_write(socket, asio::buffer(kModels), kTuple);
      co_return !ec;
    }
    static const std::string kHeader = std::string(kSseHeader) + "\r\n";
    std::tie(ec, std::ignore) = co_await asio::async_write(socket, asio::buffer(kHeader), kTuple);
    for (const auto& chunk : synthetic_chunks) {
      if (ec) co_return false;
      timer.expires_after(synthetic.interval);
      co_await timer.async_wait(kTuple);
      std::tie(ec, std::ignore) = co_await asio::async_write(socket, asio::buffer(chunk), kTuple);
    }
    if (!ec) {
      std::tie(ec, std::ignore) =
          co_await asio::async_write(socket, asio::buffer(synthetic_tail), kTuple);
    }
    co_return !ec;
  }
};

ScriptedSseServer::ScriptedSseServer(std::vector<ScriptedResponse> responses)
    : impl_(std::make_unique<Impl>()) {
  impl_->responses = std::move(responses);
  impl_->start();
}

ScriptedSseServer::ScriptedSseServer(SyntheticStreams synthetic) : impl_(std::make_unique<Impl>()) {
  impl_->synthetic_mode = true;
  impl_->synthetic = synthetic;
  impl_->build_synthetic();
  impl_->start();
}

ScriptedSseServer::~ScriptedSseServer() {
  impl_->io.stop();
  impl_->thread.join();
}

uint16_t ScriptedSseServer::port() const {
  return impl_->acceptor.local_endpoint().port();
}

std::string ScriptedSseServer::base_url() const {
  return fmt::format("http://127.0.0.1:{}", port());
}

std::vector<std::string> ScriptedSseServer::request_bodies() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->bodies;
}

std::vector<std::string> ScriptedSseServer::request_targets() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->targets;
}

int64_t ScriptedSseServer::num_connections() const {
  return impl_->num_connections.load();
}

}  // namespace inflight::bench::testing
