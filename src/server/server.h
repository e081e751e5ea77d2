// Server: the HTTP transport and the routes over a model registry, assembled.
//
//   frontend::ModelRegistry registry(options, loader);
//   registry.add("smollm2", {});
//   Server server(config, registry);
//   server.listen();                      // /health answers 503 from here on
//   std::thread loader([&] { registry.load("smollm2"); registry.set_started(); });  // then 200
//   server.run();                         // until SIGINT/SIGTERM or stop(), graceful
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "frontend/model_registry.h"
#include "server/http_server.h"

namespace inflight::server {

// What only the HTTP transport uses.
struct ServerOptions {
  std::string api_key;                       // empty: no key needed
  std::string metrics_prefix = "inflight_";  // of every /metrics name ("inflight:" as vLLM)
  double log_stats_interval_s = 10;          // the periodic engine line (engine_log.h); 0 = none
  // /v2/repository/models/{m}/load|unload allowed (--model-control-mode explicit).
  bool explicit_model_control = false;
};

struct ServerConfig {
  HttpServerConfig http;
  frontend::FrontendOptions frontend;  // every model's, but its names
  ServerOptions options;
};

class Server {
 public:
  // `registry` outlives the server.
  Server(ServerConfig config, frontend::ModelRegistry& registry);
  ~Server();

  void listen();
  int port() const;
  void run();
  void stop();
  void on_stop(std::function<void()> callback);

 private:
  std::unique_ptr<class Router> router_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<class EngineLog> engine_log_;
};

}  // namespace inflight::server
