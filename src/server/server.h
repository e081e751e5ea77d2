// Server: the HTTP transport, the routes and the front end, assembled.
//
//   Server server(config);
//   server.listen();                      // /health answers 503 from here on
//   std::thread loader([&] { server.load(build_model()); });   // then 200
//   server.run();                         // until SIGINT/SIGTERM or stop(), graceful
//   engine->shutdown(ShutdownMode::kAbort);
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "frontend/frontend.h"
#include "server/http_server.h"

namespace inflight::server {

// What only the HTTP transport uses.
struct ServerOptions {
  std::string api_key;                       // empty: no key needed
  std::string metrics_prefix = "inflight_";  // of every /metrics name ("inflight:" as vLLM)
  double log_stats_interval_s = 10;          // the periodic engine line (engine_log.h); 0 = none
};

struct ServerConfig {
  HttpServerConfig http;
  frontend::FrontendOptions frontend;
  ServerOptions options;
};

class Server {
 public:
  explicit Server(ServerConfig config);
  ~Server();

  void listen();
  int port() const;
  // Publishes the loaded model; thread-safe, once.
  void load(std::shared_ptr<const frontend::LoadedModel> model);
  void run();
  void stop();
  void on_stop(std::function<void()> callback);

  frontend::Frontend& frontend() { return *frontend_; }

 private:
  std::unique_ptr<frontend::Frontend> frontend_;
  std::unique_ptr<class Router> router_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<class EngineLog> engine_log_;
};

}  // namespace inflight::server
