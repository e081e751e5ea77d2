// server/assets/openapi.json against the routes the server registers: every route is
// described and every description is a route, so the document cannot drift from the router.
#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "frontend/frontend.h"
#include "server/assets/assets.h"
#include "server/router.h"
#include "server/routes.h"

namespace inflight::server {
namespace {

using Operation = std::pair<std::string, std::string>;  // (method upper case, path)

nlohmann::json openapi() {
  return nlohmann::json::parse(assets::openapi_json());
}

std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream in(path);
  for (std::string s; std::getline(in, s, '/');) out.push_back(s);
  return out;
}

// "/v1/models/{model}" matches "/v1/models/smollm2": a {parameter} is any one segment. A
// prefix route "/v2/models/*" matches every pattern under its prefix.
bool template_matches(const std::string& pattern, const std::string& path) {
  if (!path.empty() && path.back() == '*') {
    return pattern.rfind(path.substr(0, path.size() - 1), 0) == 0;
  }
  auto p = segments(pattern), s = segments(path);
  if (p.size() != s.size()) return false;
  for (size_t i = 0; i < p.size(); ++i) {
    bool parameter = p[i].size() > 2 && p[i].front() == '{' && p[i].back() == '}';
    if (!parameter && p[i] != s[i]) return false;
  }
  return true;
}

std::set<Operation> documented() {
  std::set<Operation> out;
  const auto doc = openapi();
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      std::string upper = method;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out.emplace(upper, path);
    }
  }
  return out;
}

std::vector<Operation> registered() {
  frontend::ModelRegistry registry(
      {}, [](const std::string&) { return std::shared_ptr<const frontend::LoadedModel>(); });
  Router router;
  add_routes(router, registry, "inflight_", [] { return HttpServerStats{}; });
  return router.routes();
}

std::string list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += "\n  " + s;
  return out;
}

TEST(OpenApi, IsOpenApi31WithRequiredParts) {
  auto doc = openapi();
  EXPECT_EQ(doc["openapi"].get<std::string>().rfind("3.1.", 0), 0u);
  EXPECT_TRUE(doc["info"]["title"].is_string());
  EXPECT_TRUE(doc["info"]["version"].is_string());
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      SCOPED_TRACE(method + " " + path);
      EXPECT_TRUE(op["summary"].is_string());
      EXPECT_TRUE(op["operationId"].is_string());
      ASSERT_TRUE(op["responses"].is_object());
      EXPECT_TRUE(op["responses"].contains("200"));
      if (method == "post") {
        EXPECT_TRUE(op["requestBody"]["content"].contains("application/json"));
      }
    }
  }
}

// Every $ref points at a component that exists.
TEST(OpenApi, ReferencesResolve) {
  auto doc = openapi();
  std::vector<std::string> dangling;
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& j) {
    if (j.is_object()) {
      if (auto it = j.find("$ref"); it != j.end()) {
        std::string ref = *it;  // "#/components/<kind>/<name>"
        auto parts = segments(ref.substr(1));
        if (parts.size() != 4 || !doc["components"][parts[2]].contains(parts[3])) {
          dangling.push_back(ref);
        }
      }
      for (const auto& [_, v] : j.items()) walk(v);
    } else if (j.is_array()) {
      for (const auto& v : j) walk(v);
    }
  };
  walk(doc);
  EXPECT_TRUE(dangling.empty()) << "dangling references:" << list(dangling);
}

// A route added to routes.cc (or another file's add_routes) must be added to openapi.json.
TEST(OpenApi, DescribesEveryRoute) {
  auto docs = documented();
  std::vector<std::string> missing;
  for (const auto& [method, path] : registered()) {
    bool found = false;
    for (const auto& [m, p] : docs) found = found || (m == method && template_matches(p, path));
    if (!found) missing.push_back(method + " " + path);
  }
  EXPECT_TRUE(missing.empty()) << "routes missing from src/server/assets/openapi.json:"
                               << list(missing);
}

TEST(OpenApi, DescribesOnlyRoutes) {
  auto routes = registered();
  ASSERT_FALSE(documented().empty());
  std::vector<std::string> extra;
  for (const auto& [method, pattern] : documented()) {
    bool found = false;
    for (const auto& [m, p] : routes)
      found = found || (m == method && template_matches(pattern, p));
    if (!found) extra.push_back(method + " " + pattern);
  }
  EXPECT_TRUE(extra.empty()) << "src/server/assets/openapi.json describes routes the server "
                                "does not have:"
                             << list(extra);
}

}  // namespace
}  // namespace inflight::server
