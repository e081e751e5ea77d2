// Request framing checks (RFC 9112 section 6.3), made on the head before any body byte is read.
//
// A request whose body length two parties could read differently is refused (400, then the
// connection is closed): that ambiguity is what request smuggling through a proxy exploits.
//   Transfer-Encoding other than exactly "chunked"   ("gzip", "chunked, identity", "xchunked")
//   Transfer-Encoding together with Content-Length
//   Transfer-Encoding on HTTP/1.0
//   Content-Length values that differ, or one that is not a decimal number
//   HTTP/1.1 without a Host header, or more than one Host header (any version)
#pragma once

#include <optional>
#include <string>

#include "server/http.h"

namespace inflight::server {

// The reason to refuse a request head (for a 400), or nullopt when its framing is sound.
// `version` is 10 or 11; `headers` have lower-cased names, in the order sent.
std::optional<std::string> framing_error(unsigned version, const HttpHeaders& headers);

}  // namespace inflight::server
