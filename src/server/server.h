// Server: the HTTP transport, the routes and the shared context, assembled.
//
//   Server server(config);
//   server.listen();                      // /health answers 503 from here on
//   std::thread loader([&] { server.load(build_model()); });   // then 200
//   server.run();                         // until SIGINT/SIGTERM or stop(), graceful
//   engine->shutdown(ShutdownMode::kAbort);
#pragma once

#include <functional>
#include <memory>

#include "server/http_server.h"
#include "server/server_context.h"

namespace inflight::server {

struct ServerConfig {
  HttpServerConfig http;
  ServerOptions options;
};

class Server {
 public:
  explicit Server(ServerConfig config);
  ~Server();

  void listen();
  int port() const;
  // Publishes the loaded model; thread-safe, once.
  void load(std::shared_ptr<const LoadedModel> model);
  void run();
  void stop();
  void on_stop(std::function<void()> callback);

  ServerContext& context() { return *ctx_; }

 private:
  std::unique_ptr<ServerContext> ctx_;
  std::unique_ptr<class Router> router_;
  std::unique_ptr<HttpServer> http_;
};

}  // namespace inflight::server
