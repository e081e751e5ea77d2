#include <gtest/gtest.h>

#include "inflight/config.h"

namespace inflight {
namespace {

TEST(KvCacheMemory, AutoFractionsAndBytes) {
  EngineConfig c;
  ASSERT_TRUE(parse_kv_cache_memory("auto", c).ok());
  EXPECT_DOUBLE_EQ(c.kv_cache_memory_fraction, 0.0);
  EXPECT_EQ(c.kv_cache_bytes, 0);  // resolved against the device at load
  EXPECT_TRUE(c.validate().ok());
  ASSERT_TRUE(parse_kv_cache_memory("0.5", c).ok());
  EXPECT_DOUBLE_EQ(c.kv_cache_memory_fraction, 0.5);
  ASSERT_TRUE(parse_kv_cache_memory("2GiB", c).ok());
  EXPECT_DOUBLE_EQ(c.kv_cache_memory_fraction, 0.0);
  EXPECT_EQ(c.kv_cache_bytes, int64_t{2} << 30);
  ASSERT_TRUE(parse_kv_cache_memory("1048576", c).ok());
  EXPECT_EQ(c.kv_cache_bytes, int64_t{1} << 20);
  EXPECT_TRUE(c.validate().ok());
  for (const char* bad : {"", "-1", "lots", "5TB", "0"}) {
    const Status s = parse_kv_cache_memory(bad, c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace inflight
