// The transport's request checks without a socket: framing (request smuggling), Host (DNS
// rebinding), CORS and JSON content types.
#include <gtest/gtest.h>

#include "server/content_type.h"
#include "server/cors.h"
#include "server/host_check.h"
#include "server/request_framing.h"

namespace inflight::server {
namespace {

TEST(RequestFraming, AcceptsPlainRequests) {
  EXPECT_FALSE(framing_error(11, {{"host", "x"}}));
  EXPECT_FALSE(framing_error(11, {{"host", "x"}, {"content-length", "12"}}));
  EXPECT_FALSE(framing_error(11, {{"host", "x"}, {"transfer-encoding", "Chunked"}}));
  EXPECT_FALSE(
      framing_error(11, {{"host", "x"}, {"content-length", "5"}, {"content-length", "5"}}));
  EXPECT_FALSE(framing_error(10, {}));  // HTTP/1.0 needs no Host
}

TEST(RequestFraming, RefusesWhatCouldBeSmuggled) {
  const HttpHeaders host = {{"host", "x"}};
  auto with = [&](HttpHeaders extra) {
    HttpHeaders h = host;
    h.insert(h.end(), extra.begin(), extra.end());
    return h;
  };
  for (const char* te : {"gzip", "chunked, identity", "xchunked", "identity", "gzip, chunked",
                         "chunked, chunked", "", " , chunked", "chunked;q=1"}) {
    EXPECT_TRUE(framing_error(11, with({{"transfer-encoding", te}}))) << te;
  }
  EXPECT_TRUE(framing_error(
      11, with({{"transfer-encoding", "chunked"}, {"transfer-encoding", "chunked"}})));
  EXPECT_TRUE(framing_error(11, with({{"transfer-encoding", "chunked"}, {"content-length", "3"}})));
  EXPECT_TRUE(framing_error(10, {{"transfer-encoding", "chunked"}}));
  EXPECT_TRUE(framing_error(11, with({{"content-length", "3"}, {"content-length", "4"}})));
  EXPECT_TRUE(framing_error(11, with({{"content-length", "3, 4"}})));
  EXPECT_TRUE(framing_error(11, with({{"content-length", "-1"}})));
  EXPECT_TRUE(framing_error(11, {}));                              // no Host
  EXPECT_TRUE(framing_error(11, {{"host", "a"}, {"host", "b"}}));  // two
  EXPECT_TRUE(framing_error(10, {{"host", "a"}, {"host", "a"}}));
}

TEST(HostCheck, LoopbackNames) {
  for (const char* h : {"localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "::1", "[::1]"}) {
    EXPECT_TRUE(is_loopback_host(h)) << h;
  }
  for (const char* h : {"0.0.0.0", "10.0.0.1", "::", "example.com", "127.0.0.1.example.com", ""}) {
    EXPECT_FALSE(is_loopback_host(h)) << h;
  }
}

TEST(HostCheck, LoopbackBindServesItsNamesOnly) {
  HostCheck check("127.0.0.1", {});
  ASSERT_TRUE(check.enabled());
  for (std::string h :
       {"localhost", "localhost:8000", "127.0.0.1:8000", "[::1]:8000", "[::1]", "LocalHost:8000"}) {
    EXPECT_TRUE(check.allows(&h, 8000)) << h;
  }
  for (std::string h : {"attacker.example", "attacker.example:8000", "localhost:9000",
                        "localhost.attacker.example", "127.0.0.2:8000", ""}) {
    EXPECT_FALSE(check.allows(&h, 8000)) << h;
  }
  EXPECT_FALSE(check.allows(nullptr, 8000));
}

TEST(HostCheck, AllowedHosts) {
  HostCheck check("127.0.0.1", {"api.example", "other.example:443"});
  for (std::string h : {"api.example", "api.example:8443", "other.example:443", "localhost"}) {
    EXPECT_TRUE(check.allows(&h, 8000)) << h;
  }
  std::string wrong_port = "other.example:80";
  EXPECT_FALSE(check.allows(&wrong_port, 8000));
  EXPECT_FALSE(HostCheck("127.0.0.1", {"*"}).enabled());
  // Not loopback: unchecked unless --allowed-hosts is given.
  EXPECT_FALSE(HostCheck("0.0.0.0", {}).enabled());
  HostCheck lan("10.0.0.5", {"api.example"});
  std::string bind = "10.0.0.5:8000", other = "10.0.0.6:8000";
  EXPECT_TRUE(lan.allows(&bind, 8000));
  EXPECT_FALSE(lan.allows(&other, 8000));
}

HttpRequest request(std::string method, HttpHeaders headers) {
  HttpRequest r;
  r.method = std::move(method);
  r.target = r.path = "/v1/completions";
  r.headers = std::move(headers);
  return r;
}

TEST(Cors, OffByDefault) {
  CorsPolicy cors({});
  auto req = request("OPTIONS",
                     {{"origin", "https://a.example"}, {"access-control-request-method", "POST"}});
  EXPECT_FALSE(cors.preflight(req));
  EXPECT_TRUE(cors.response_headers(req).empty());
}

TEST(Cors, ListedOrigins) {
  CorsPolicy cors({"https://a.example"});
  auto listed = request("POST", {{"origin", "https://a.example"}});
  HttpHeaders h = cors.response_headers(listed);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0], HttpHeaders::value_type("Access-Control-Allow-Origin", "https://a.example"));
  EXPECT_EQ(h[1], HttpHeaders::value_type("Vary", "Origin"));
  auto other = request("POST", {{"origin", "https://b.example"}});
  EXPECT_EQ(cors.response_headers(other).size(), 1u);  // Vary only
  EXPECT_FALSE(cors.preflight(request(
      "OPTIONS", {{"origin", "https://b.example"}, {"access-control-request-method", "POST"}})));

  auto pre = cors.preflight(
      request("OPTIONS", {{"origin", "https://a.example"},
                          {"access-control-request-method", "POST"},
                          {"access-control-request-headers", "Content-Type, X-Trace"}}));
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  bool headers_ok = false;
  for (const auto& [name, value] : pre->headers) {
    if (name == "Access-Control-Allow-Headers") {
      headers_ok = value == "authorization, content-type, x-trace";
    }
  }
  EXPECT_TRUE(headers_ok);
  CorsPolicy any({"*"});
  EXPECT_EQ(any.response_headers(other)[0].second, "*");
}

TEST(ContentType, JsonOnly) {
  auto with = [](std::vector<std::string> types) {
    HttpRequest r;
    for (auto& t : types) r.headers.emplace_back("content-type", t);
    return has_json_content_type(r);
  };
  EXPECT_TRUE(with({}));
  for (const char* ok : {"application/json", "Application/JSON", "application/json; charset=utf-8",
                         "application/vnd.api+json", "application/merge-patch+json ; x=y"}) {
    EXPECT_TRUE(with({ok})) << ok;
  }
  for (const char* bad :
       {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
        "application/jsonx", "application/+json", "text/json", "", "application/json-seq"}) {
    EXPECT_FALSE(with({bad})) << bad;
  }
  EXPECT_FALSE(with({"application/json", "text/plain"}));
}

}  // namespace
}  // namespace inflight::server
