// The media types a JSON route accepts (as FastAPI, which vLLM's server runs on):
// "application/json" or any "application/<x>+json", parameters such as "; charset=utf-8"
// allowed, case-insensitive; a missing Content-Type is read as JSON. Anything else ("text/plain",
// form encodings) is 415: those are the types a browser page may POST across origins without
// a preflight, so accepting them would let any web page drive the server.
#pragma once

namespace inflight::server {

struct HttpRequest;

// True when the body of `req` may be parsed as JSON (see above); false also when it has more
// than one Content-Type header.
bool has_json_content_type(const HttpRequest& req);

// True when `req` has one Content-Type, "application/octet-stream" (parameters allowed): not a
// type a browser may send across origins without a preflight.
bool has_binary_content_type(const HttpRequest& req);

}  // namespace inflight::server
