#include "server/static_pages.h"

#include <string>
#include <utility>

#include <fmt/format.h>

namespace inflight::server {

HttpResponse html_page(const assets::Page& page) {
  std::string policy = fmt::format(
      "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src data:; "
      "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
      page.script_sources, page.style_sources);
  HttpResponse res;
  res.content_type = "text/html; charset=utf-8";
  res.headers = {{"Content-Security-Policy", std::move(policy)},
                 {"X-Content-Type-Options", "nosniff"},
                 {"Referrer-Policy", "no-referrer"},
                 {"Cache-Control", "no-cache"}};
  res.body = std::string(page.html);
  return res;
}

HttpResponse openapi_document() {
  HttpResponse res;
  res.headers = {{"X-Content-Type-Options", "nosniff"}};
  res.body = std::string(assets::openapi_json());
  return res;
}

}  // namespace inflight::server
