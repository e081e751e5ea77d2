#include "server/static_pages.h"

#include "server/assets/assets.h"

namespace inflight::server {

namespace {

constexpr const char* kPagePolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

}  // namespace

HttpResponse html_page(std::string_view html) {
  HttpResponse res;
  res.content_type = "text/html; charset=utf-8";
  res.headers = {{"Content-Security-Policy", kPagePolicy},
                 {"X-Content-Type-Options", "nosniff"},
                 {"Referrer-Policy", "no-referrer"},
                 {"Cache-Control", "no-cache"}};
  res.body = std::string(html);
  return res;
}

HttpResponse openapi_document() {
  HttpResponse res;
  res.headers = {{"X-Content-Type-Options", "nosniff"}};
  res.body = std::string(assets::openapi_json());
  return res;
}

}  // namespace inflight::server
