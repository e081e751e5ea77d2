#include "server/router.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "frontend/api_error.h"

namespace inflight::server {
namespace {

HttpRequest request(std::string method, std::string path,
                    std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpRequest r;
  r.method = std::move(method);
  r.path = path;
  r.target = std::move(path);
  r.headers = std::move(headers);
  return r;
}

HttpResponse ok(const HttpRequest&) {
  HttpResponse res;
  res.body = "{}";
  return res;
}

std::string error_type(const HttpResponse& res) {
  return nlohmann::json::parse(res.body)["error"]["type"];
}

TEST(Router, NotFoundAndMethodNotAllowed) {
  Router router;
  router.add("POST", "/v1/completions", ok, true);
  EXPECT_EQ(router.handle(request("POST", "/v1/completions")).status, 200);
  HttpResponse missing = router.handle(request("GET", "/nope"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(error_type(missing), "NotFoundError");
  HttpResponse wrong = router.handle(request("GET", "/v1/completions"));
  EXPECT_EQ(wrong.status, 405);
  ASSERT_EQ(wrong.headers.size(), 1u);
  EXPECT_EQ(wrong.headers[0], std::make_pair(std::string("Allow"), std::string("POST")));
}

TEST(Router, ListsItsRoutes) {
  Router router;
  router.add("POST", "/v1/completions", ok, true);
  router.add("GET", "/", ok, false);
  router.add("POST", "/", ok, false);
  using Route = std::pair<std::string, std::string>;
  EXPECT_EQ(router.routes(),
            (std::vector<Route>{{"GET", "/"}, {"POST", "/"}, {"POST", "/v1/completions"}}));
}

TEST(Router, ApiKeyOnProtectedRoutesOnly) {
  Router router("k3y");
  router.add("POST", "/v1/completions", ok, true);
  router.add("GET", "/health", ok, false);
  EXPECT_EQ(router.handle(request("POST", "/v1/completions")).status, 401);
  EXPECT_EQ(router.handle(request("POST", "/v1/completions", {{"authorization", "Bearer no"}}))
                .status,
            401);
  EXPECT_EQ(router.handle(request("POST", "/v1/completions", {{"authorization", "Bearer k3y"}}))
                .status,
            200);
  EXPECT_EQ(router.handle(request("GET", "/health")).status, 200);
  // Two Authorization headers: refused even when the first one is right.
  EXPECT_EQ(router.handle(request("POST", "/v1/completions", {{"authorization", "Bearer k3y"},
                                                              {"authorization", "Bearer no"}}))
                .status,
            401);
}

TEST(Router, HeadIsGetWithoutBody) {
  Router router;
  router.add("GET", "/health", ok, false);
  router.add("POST", "/v1/completions", ok, false);
  HttpResponse head = router.handle(request("HEAD", "/health"));
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "{}");  // the transport sends its length, not the bytes
  EXPECT_EQ(router.handle(request("HEAD", "/v1/completions")).status, 405);
  HttpResponse wrong = router.handle(request("DELETE", "/health"));
  EXPECT_EQ(wrong.headers[0].second, "GET, HEAD");
}

TEST(Router, PostBodiesMustBeJson) {
  Router router;
  router.add("POST", "/v1/completions", ok, false);
  EXPECT_EQ(router.handle(request("POST", "/v1/completions")).status, 200);
  EXPECT_EQ(router.handle(request("POST", "/v1/completions",
                                  {{"content-type", "application/json; charset=utf-8"}}))
                .status,
            200);
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded"}) {
    HttpResponse res = router.handle(request("POST", "/v1/completions", {{"content-type", type}}));
    EXPECT_EQ(res.status, 415) << type;
    EXPECT_EQ(error_type(res), "UnsupportedMediaType");
  }
}

TEST(Router, ExceptionsBecomeErrorResponses) {
  Router router;
  router.add("POST", "/api", [](const HttpRequest&) -> HttpResponse {
    throw frontend::ApiError(429, "busy");
  }, false);
  router.add("POST", "/arg", [](const HttpRequest&) -> HttpResponse {
    INFLIGHT_CHECK_CODE(false, ErrorCode::kInvalidArgument, "bad");
    return {};
  }, false);
  router.add("POST", "/unsupported", [](const HttpRequest&) -> HttpResponse {
    INFLIGHT_THROW(ErrorCode::kUnsupported, "not this one");
  }, false);
  router.add("POST", "/check", [](const HttpRequest&) -> HttpResponse {
    INFLIGHT_CHECK(false, "broken invariant");
    return {};
  }, false);
  router.add("POST", "/bug", [](const HttpRequest&) -> HttpResponse {
    throw std::runtime_error("boom");
  }, false);
  EXPECT_EQ(router.handle(request("POST", "/api")).status, 429);
  EXPECT_EQ(router.handle(request("POST", "/arg")).status, 400);
  EXPECT_EQ(router.handle(request("POST", "/unsupported")).status, 400);
  for (const char* path : {"/check", "/bug"}) {
    HttpResponse bug = router.handle(request("POST", path));
    EXPECT_EQ(bug.status, 500);
    EXPECT_EQ(error_type(bug), "InternalServerError");
    // What failed and where goes to the log, not to the client.
    const std::string message = nlohmann::json::parse(bug.body)["error"]["message"];
    EXPECT_EQ(message, "internal server error") << path;
  }
}

TEST(Router, PrefixRoutesTakeWhatExactRoutesLeave) {
  Router router;
  auto answer = [](int status) {
    return [status](const HttpRequest&) {
      HttpResponse res;
      res.status = status;
      return res;
    };
  };
  router.add("GET", "/v2/models/stats", answer(201), false);
  router.add_prefix("GET", "/v2/", answer(202), false, false);
  router.add_prefix("GET", "/v2/models/", answer(203), false, false);
  router.add_prefix("POST", "/v2/models/", answer(204), false, true);
  EXPECT_EQ(router.handle(request("GET", "/v2/models/stats")).status, 201);
  EXPECT_EQ(router.handle(request("GET", "/v2/models/m/ready")).status, 203);  // the longest
  EXPECT_EQ(router.handle(request("GET", "/v2/health")).status, 202);
  EXPECT_EQ(router.handle(request("GET", "/v3")).status, 404);
  EXPECT_EQ(router.handle(request("PUT", "/v2/models/m")).status, 405);
  // A binary body is accepted; a type a browser sends cross-origin without a preflight is not.
  EXPECT_EQ(router
                .handle(request("POST", "/v2/models/m/infer",
                                {{"content-type", "application/octet-stream"}}))
                .status,
            204);
  EXPECT_EQ(
      router.handle(request("POST", "/v2/models/m/infer", {{"content-type", "text/plain"}})).status,
      415);
}

}  // namespace
}  // namespace inflight::server
