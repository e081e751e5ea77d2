#include "server/api_key.h"

#include <gtest/gtest.h>

#include <string>

namespace inflight::server {
namespace {

TEST(ConstantTimeEqual, ComparesContentAndLength) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("sk-abc", "sk-abc"));
  EXPECT_FALSE(constant_time_equal("sk-abc", "sk-abd"));
  EXPECT_FALSE(constant_time_equal("sk-abc", "sk-ab"));
  EXPECT_FALSE(constant_time_equal("sk-ab", "sk-abc"));
  EXPECT_FALSE(constant_time_equal("", "x"));
  // A prefix padded with NULs must not match (the length folds into the result).
  EXPECT_FALSE(constant_time_equal(std::string("ab\0", 3), "ab"));
  EXPECT_FALSE(constant_time_equal("\x80", "\x00"));
}

TEST(AuthorizationMatches, ParsesBearerScheme) {
  std::string good = "Bearer secret-key";
  EXPECT_TRUE(authorization_matches(&good, "secret-key"));
  std::string lower = "bearer secret-key";
  EXPECT_TRUE(authorization_matches(&lower, "secret-key"));
  std::string spaces = "Bearer   secret-key  ";
  EXPECT_TRUE(authorization_matches(&spaces, "secret-key"));
  std::string wrong = "Bearer secret-kez";
  EXPECT_FALSE(authorization_matches(&wrong, "secret-key"));
  std::string basic = "Basic secret-key";
  EXPECT_FALSE(authorization_matches(&basic, "secret-key"));
  std::string bare = "secret-key";
  EXPECT_FALSE(authorization_matches(&bare, "secret-key"));
  std::string empty = "Bearer ";
  EXPECT_FALSE(authorization_matches(&empty, "secret-key"));
  EXPECT_FALSE(authorization_matches(nullptr, "secret-key"));
}

}  // namespace
}  // namespace inflight::server
