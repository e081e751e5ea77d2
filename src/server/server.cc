#include "server/server.h"

#include "server/engine_log.h"
#include "server/router.h"
#include "server/routes.h"

namespace inflight::server {

Server::Server(ServerConfig config, frontend::ModelRegistry& registry)
    : router_(std::make_unique<Router>(config.options.api_key)) {
  http_ = std::make_unique<HttpServer>(
      config.http,
      [router = router_.get()](const HttpRequest& req) { return router->handle(req); });
  add_routes(
      *router_, registry, config.options.metrics_prefix,
      [http = http_.get()] { return http->stats(); }, config.options.explicit_model_control);
  if (config.options.log_stats_interval_s > 0) {
    engine_log_ = std::make_unique<EngineLog>(registry, config.options.log_stats_interval_s);
  }
}

Server::~Server() = default;

void Server::listen() {
  http_->listen();
}
int Server::port() const {
  return http_->port();
}
void Server::run() {
  http_->run();
}
void Server::stop() {
  http_->stop();
}
void Server::on_stop(std::function<void()> callback) {
  http_->on_stop(std::move(callback));
}

}  // namespace inflight::server
