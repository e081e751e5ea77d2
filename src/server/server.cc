#include "server/server.h"

#include "server/router.h"
#include "server/routes.h"

namespace inflight::server {

Server::Server(ServerConfig config)
    : ctx_(std::make_unique<ServerContext>(config.options)),
      router_(std::make_unique<Router>(config.options.api_key)) {
  http_ = std::make_unique<HttpServer>(
      config.http, [router = router_.get()](const HttpRequest& req) { return router->handle(req); });
  add_openai_routes(*router_, *ctx_);
  add_tgi_routes(*router_, *ctx_);
  add_tokenize_routes(*router_, *ctx_);
  add_info_routes(*router_, *ctx_, [http = http_.get()] { return http->stats(); });
}

Server::~Server() = default;

void Server::listen() { http_->listen(); }
int Server::port() const { return http_->port(); }
void Server::load(std::shared_ptr<const LoadedModel> model) { ctx_->load(std::move(model)); }
void Server::run() { http_->run(); }
void Server::stop() { http_->stop(); }
void Server::on_stop(std::function<void()> callback) { http_->on_stop(std::move(callback)); }

}  // namespace inflight::server
