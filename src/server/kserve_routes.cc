#include "server/kserve_routes.h"

#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "frontend/error_mapping.h"
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
  std::string action;  // "", "ready", "infer", "generate", "generate_stream"
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

HttpResponse model_route(frontend::Frontend& fe, const HttpRequest& req) {
  const std::optional<ModelPath> p = parse_model_path(req.path);
  if (!p) return kserve_error(404, "route " + req.path + " not found");
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post_action =
      p->action == "infer" || p->action == "generate" || p->action == "generate_stream";
  if (p->action != "" && p->action != "ready" && !post_action) {
    return kserve_error(404, "route " + req.path + " not found");
  }
  if (get == post_action) {
    HttpResponse res = kserve_error(405, "method " + req.method + " not allowed on " + req.path);
    res.headers.emplace_back("Allow", post_action ? "POST" : "GET, HEAD");
    return res;
  }
  try {
    frontend::check_kserve_model(fe, p->model, p->version);
    if (p->action == "ready") {
      return fe.ready() ? empty_ok() : kserve_error(503, "the model is still loading");
    }
    if (p->action.empty()) return json_response(frontend::kserve_model_metadata(fe));
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

}  // namespace

void add_kserve_routes(Router& router, frontend::Frontend& fe) {
  router.add(
      "GET", "/v2/health/live", [](const HttpRequest&) { return empty_ok(); }, false);
  router.add(
      "GET", "/v2/health/ready",
      [&fe](const HttpRequest&) {
        return fe.ready() ? empty_ok() : kserve_error(503, "the model is still loading");
      },
      false);
  router.add(
      "GET", "/v2",
      [](const HttpRequest&) { return json_response(frontend::kserve_server_metadata()); }, false);
  const std::string prefix(kModelsPrefix);
  // Triton's clients send JSON with no Content-Type, binary tensors perhaps as octet-stream.
  const HttpHandler handler = [&fe](const HttpRequest& r) { return model_route(fe, r); };
  router.add_prefix("GET", prefix, handler, false, false);
  router.add_prefix("POST", prefix, handler, true, true);
}

}  // namespace inflight::server
