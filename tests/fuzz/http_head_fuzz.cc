// libFuzzer target: the transport's checks on a request head (framing, Host, CORS, content
// type), the Boost-free half of the HTTP server, on arbitrary bytes.
//
// The bytes are a raw request: a request line, then "name: value" lines up to an empty line
// (names lower-cased, as the transport hands them over), then a body that is ignored. Nothing
// may crash; a head that passes the framing check has at most one Host, and a
// Transfer-Encoding only as exactly "chunked" with no Content-Length.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/content_type.h"
#include "server/cors.h"
#include "server/host_check.h"
#include "server/request_framing.h"

namespace {

using namespace inflight::server;

inflight::server::HttpRequest parse_head(std::string_view text, unsigned& version) {
  HttpRequest req;
  size_t eol = text.find("\r\n");
  std::string_view line = text.substr(0, eol);
  version = line.ends_with("HTTP/1.0") ? 10 : 11;
  req.method = std::string(line.substr(0, line.find(' ')));
  req.target = req.path = "/v1/completions";
  while (eol != std::string_view::npos) {
    text.remove_prefix(eol + 2);
    eol = text.find("\r\n");
    line = text.substr(0, eol);
    if (line.empty()) break;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    req.headers.emplace_back(std::move(name), std::string(value));
  }
  return req;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  unsigned version = 11;
  const HttpRequest req = parse_head(text, version);
  if (!framing_error(version, req.headers)) {
    if (req.header_count("host") > 1) std::abort();
    if (req.header("transfer-encoding") != nullptr &&
        (req.header_count("transfer-encoding") != 1 || req.header("content-length") != nullptr ||
         version < 11)) {
      std::abort();
    }
  }
  for (const HostCheck& check : {HostCheck("127.0.0.1", {}), HostCheck("::1", {"a.example:1"}),
                                 HostCheck("0.0.0.0", {"*"})}) {
    (void)check.allows(req.header("host"), 8000);
  }
  const CorsPolicy cors({"https://a.example"});
  (void)cors.response_headers(req);
  if (auto pre = cors.preflight(req); pre && pre->status != 204) std::abort();
  (void)has_json_content_type(req);
  (void)is_loopback_host(req.header("host") ? *req.header("host") : std::string());
  return 0;
}
