// Where tests find their inputs. Tests that need shared data or the default model skip, saying
// why, when it is absent, so a bare clone still passes its self-contained tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace inflight::testing {

// ../shared/data (or $INFLIGHT_DATA_DIR), joined with `rel`; empty if it does not exist.
inline std::string data_path(const std::string& rel) {
  const char* env = std::getenv("INFLIGHT_DATA_DIR");
  const std::filesystem::path root = (env && *env) ? env : INFLIGHT_TEST_DATA_DIR;
  const auto p = root / rel;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

// The default GGUF model (or $INFLIGHT_TEST_MODEL); empty if it does not exist.
inline std::string model_path() {
  const char* env = std::getenv("INFLIGHT_TEST_MODEL");
  const std::string p = (env && *env) ? env : INFLIGHT_TEST_MODEL;
  return std::filesystem::exists(p) ? p : std::string();
}

// A fresh scratch directory under the build tree for one test.
inline std::filesystem::path scratch_dir(const std::string& name) {
  auto p = std::filesystem::path(INFLIGHT_BINARY_DIR) / "test-scratch" / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

}  // namespace inflight::testing

#define INFLIGHT_REQUIRE_DATA(var, rel)                                                   \
  const std::string var = ::inflight::testing::data_path(rel);                            \
  if (var.empty()) GTEST_SKIP() << "skipped: shared data '" << (rel)                      \
                                << "' not found (set INFLIGHT_DATA_DIR to ../shared/data)"

#define INFLIGHT_REQUIRE_MODEL(var)                                                        \
  const std::string var = ::inflight::testing::model_path();                               \
  if (var.empty()) GTEST_SKIP() << "skipped: default model not found (run scripts/fetch_model.sh)"
