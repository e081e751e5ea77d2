#include "server/kserve_routes.h"

#include <charconv>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "frontend/error_mapping.h"
#include "frontend/json_fields.h"
#include "frontend/kserve_api.h"
#include "server/generation_adapters.h"
#include "server/http_responses.h"

namespace inflight::server {

namespace {

constexpr std::string_view kModelsPrefix = "/v2/models/";

HttpResponse kserve_error(int status, const std::string& message) {
  HttpResponse res;
  res.status = status;
  res.body = nlohmann::ordered_json{{"error", message}}.dump();
  return res;
}

HttpResponse empty_ok() {
  HttpResponse res;
  res.content_type = "text/plain";
  return res;
}

// %XX escapes of a path segment (clients quote model names).
std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned value = 0;
    if (s[i] == '%' && i + 2 < s.size() &&
        std::from_chars(s.data() + i + 1, s.data() + i + 3, value, 16).ptr == s.data() + i + 3) {
      out += static_cast<char>(value);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// /v2/models/{model}[/versions/{version}][/{action}]
struct ModelPath {
  std::string model;
  std::string version;
  std::string action;  // "", "ready", "config", "stats", "infer", "generate", "generate_stream"
};

std::optional<ModelPath> parse_model_path(std::string_view path) {
  path.remove_prefix(kModelsPrefix.size());
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    parts.push_back(path.substr(0, slash));
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
  }
  if (parts.empty() || parts[0].empty()) return std::nullopt;
  ModelPath p;
  p.model = percent_decode(parts[0]);
  size_t next = 1;
  if (parts.size() >= 3 && parts[1] == "versions") {
    p.version = percent_decode(parts[2]);
    next = 3;
  }
  if (parts.size() > next + 1) return std::nullopt;
  if (parts.size() == next + 1) p.action = parts[next];
  return p;
}

// An infer response whose binary outputs move out of the JSON body into binary data after it
// (Triton's binary tensor extension).
class BinaryOutputsResponse final : public DeferredResponse {
 public:
  BinaryOutputsResponse(std::shared_ptr<DeferredResponse> inner,
                        frontend::KServeBinaryOutputs binary)
      : inner_(std::move(inner)), binary_(std::move(binary)) {}
  void start(std::function<void()> wake) override { inner_->start(std::move(wake)); }
  void cancel() override { inner_->cancel(); }
  std::optional<HttpResponse> poll() override {
    std::optional<HttpResponse> res = inner_->poll();
    if (!res || res->status != 200) return res;
    auto body = nlohmann::ordered_json::parse(res->body);
    const std::string blob = frontend::move_outputs_to_binary(body, binary_);
    res->body = body.dump();
    res->headers.emplace_back("Inference-Header-Content-Length", std::to_string(res->body.size()));
    res->content_type = "application/octet-stream";
    res->body += blob;
    return res;
  }

 private:
  std::shared_ptr<DeferredResponse> inner_;
  frontend::KServeBinaryOutputs binary_;
};

// Inference-Header-Content-Length of the binary tensor extension.
std::optional<size_t> json_header_length(const HttpRequest& req) {
  const std::string* h = req.header("inference-header-content-length");
  if (h == nullptr) return std::nullopt;
  size_t n = 0;
  if (std::from_chars(h->data(), h->data() + h->size(), n).ptr != h->data() + h->size()) {
    throw frontend::ApiError(400, "Inference-Header-Content-Length is not a number");
  }
  return n;
}

// GET /v2/models/stats: every loaded model's statistics.
HttpResponse all_statistics(const frontend::ModelRegistry& registry) {
  nlohmann::ordered_json stats = nlohmann::ordered_json::array();
  for (const auto& fe : registry.frontends()) {
    if (fe->ready()) stats.push_back(frontend::kserve_model_statistics(*fe));
  }
  return json_response({{"model_stats", std::move(stats)}});
}

HttpResponse model_route(const frontend::ModelRegistry& registry, const HttpRequest& req) {
  const bool get = req.method == "GET" || req.method == "HEAD";
  if (get && req.path == std::string(kModelsPrefix) + "stats") return all_statistics(registry);
  const std::optional<ModelPath> p = parse_model_path(req.path);
  if (!p) return kserve_error(404, "route " + req.path + " not found");
  const bool post_action =
      p->action == "infer" || p->action == "generate" || p->action == "generate_stream";
  const bool get_action =
      p->action == "" || p->action == "ready" || p->action == "config" || p->action == "stats";
  if (!get_action && !post_action) return kserve_error(404, "route " + req.path + " not found");
  if (get == post_action) {
    HttpResponse res = kserve_error(405, "method " + req.method + " not allowed on " + req.path);
    res.headers.emplace_back("Allow", post_action ? "POST" : "GET, HEAD");
    return res;
  }
  try {
    frontend::Frontend& fe = *frontend::resolve_kserve_model(registry, p->model, p->version);
    if (p->action == "ready") {
      return fe.ready() ? empty_ok() : kserve_error(503, "the model is still loading");
    }
    if (p->action.empty()) return json_response(frontend::kserve_model_metadata(fe));
    if (p->action == "config") return json_response(frontend::kserve_model_config(fe));
    if (p->action == "stats") {
      return json_response({{"model_stats", {frontend::kserve_model_statistics(fe)}}});
    }
    if (p->action == "infer") {
      frontend::KServeHttpInfer infer =
          frontend::start_kserve_http_infer(fe, req.body, json_header_length(req));
      HttpResponse res = generation_response(std::move(infer.started));
      if (infer.binary.any()) {
        res.deferred = std::make_shared<BinaryOutputsResponse>(std::move(res.deferred),
                                                               std::move(infer.binary));
      }
      return res;
    }
    return generation_response(
        frontend::start_kserve_generate(fe, req.body, p->action == "generate_stream"));
  } catch (...) {
    const frontend::ApiError e = frontend::current_api_error(req.method + " " + req.path);
    return kserve_error(e.status(), e.what());
  }
}

// POST /v2/repository/models/{model}/load: answered once the load has finished, on a thread
// of the registry's (the connection's strand only polls).
class LoadResponse final : public DeferredResponse {
 public:
  LoadResponse(frontend::ModelRegistry& registry, std::string model)
      : registry_(registry), model_(std::move(model)), shared_(std::make_shared<Shared>()) {}
  void start(std::function<void()> wake) override {
    shared_->wake = std::move(wake);
    registry_.load_async(model_, [shared = shared_](Status status) {
      std::function<void()> wake;
      {
        std::lock_guard lock(shared->mutex);
        shared->status = std::move(status);
        wake = shared->wake;
      }
      if (wake) wake();
    });
  }
  void cancel() override {
    std::lock_guard lock(shared_->mutex);
    shared_->wake = nullptr;  // the load goes on; nobody waits for it
  }
  std::optional<HttpResponse> poll() override {
    std::lock_guard lock(shared_->mutex);
    if (!shared_->status) return std::nullopt;
    if (!shared_->status->ok()) {
      const int code = shared_->status->code() == StatusCode::kNotFound ? 404 : 400;
      return kserve_error(code, shared_->status->message());
    }
    return json_response(nlohmann::ordered_json::object());
  }

 private:
  struct Shared {
    std::mutex mutex;
    std::function<void()> wake;
    std::optional<Status> status;
  };
  frontend::ModelRegistry& registry_;
  const std::string model_;
  std::shared_ptr<Shared> shared_;
};

constexpr std::string_view kRepositoryModelsPrefix = "/v2/repository/models/";

HttpResponse repository_index(frontend::ModelRegistry& registry, const HttpRequest& req) {
  bool ready_only = false;
  if (!req.body.empty()) {
    const auto body = frontend::parse_json_object(req.body);
    ready_only = frontend::FieldReader(body).boolean("ready").value_or(false);
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const frontend::ModelStatus& m : registry.index()) {
    if (ready_only && m.state != frontend::ModelState::kReady) continue;
    out.push_back({{"name", m.name},
                   {"version", frontend::kKServeModelVersion},
                   {"state", frontend::model_state_name(m.state)},
                   {"reason", m.reason}});
  }
  return json_response(out);
}

HttpResponse repository_model(frontend::ModelRegistry& registry, bool explicit_control,
                              const HttpRequest& req) {
  std::string_view rest = std::string_view(req.path).substr(kRepositoryModelsPrefix.size());
  const size_t slash = rest.find('/');
  const std::string_view action =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  if (slash == 0 || (action != "load" && action != "unload")) {
    return kserve_error(404, "route " + req.path + " not found");
  }
  if (!explicit_control) {
    return kserve_error(400,
                        "explicit model load / unload is not allowed: start the server with "
                        "--model-control-mode explicit");
  }
  const std::string model = percent_decode(rest.substr(0, slash));
  if (action == "load") {
    HttpResponse res;
    res.deferred = std::make_shared<LoadResponse>(registry, model);
    return res;
  }
  const Status s = registry.unload(model);
  if (!s.ok()) return kserve_error(s.code() == StatusCode::kNotFound ? 404 : 400, s.message());
  return json_response(nlohmann::ordered_json::object());
}

}  // namespace

void add_kserve_repository_routes(Router& router, frontend::ModelRegistry& registry,
                                  bool explicit_model_control) {
  router.add(
      "POST", "/v2/repository/index",
      [&registry](const HttpRequest& r) {
        try {
          return repository_index(registry, r);
        } catch (...) {
          const frontend::ApiError e = frontend::current_api_error(r.method + " " + r.path);
          return kserve_error(e.status(), e.what());
        }
      },
      true);
  router.add_prefix(
      "POST", std::string(kRepositoryModelsPrefix),
      [&registry, explicit_model_control](const HttpRequest& r) {
        return repository_model(registry, explicit_model_control, r);
      },
      true, false);
}

void add_kserve_routes(Router& router, frontend::ModelRegistry& registry) {
  router.add(
      "GET", "/v2/health/live", [](const HttpRequest&) { return empty_ok(); }, false);
  router.add(
      "GET", "/v2/health/ready",
      [&registry](const HttpRequest&) {
        return registry.ready() ? empty_ok() : kserve_error(503, "the model is still loading");
      },
      false);
  router.add(
      "GET", "/v2",
      [](const HttpRequest&) { return json_response(frontend::kserve_server_metadata()); }, false);
  const std::string prefix(kModelsPrefix);
  // Triton's clients send JSON with no Content-Type, binary tensors perhaps as octet-stream.
  const HttpHandler handler = [&registry](const HttpRequest& r) {
    return model_route(registry, r);
  };
  router.add_prefix("GET", prefix, handler, false, false);
  router.add_prefix("POST", prefix, handler, true, true);
}

}  // namespace inflight::server
