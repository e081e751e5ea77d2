#include "server/http_responses.h"

#include "frontend/openai_responses.h"
#include "server/sse.h"

namespace inflight::server {

HttpResponse json_response(const nlohmann::ordered_json& body) {
  HttpResponse res;
  res.body = frontend::dump_json(body);
  return res;
}

HttpResponse error_response(int status, const std::string& message, const std::string& param) {
  HttpResponse res;
  res.status = status;
  res.body = frontend::error_body(status, message, param);
  return res;
}

HttpResponse error_response(const frontend::ApiError& error) {
  return error_response(error.status(), error.what(), error.param());
}

HttpResponse sse_response(std::shared_ptr<StreamBody> body) {
  HttpResponse res;
  res.content_type = std::string(kSseContentType);
  res.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  res.stream = std::move(body);
  return res;
}

}  // namespace inflight::server
