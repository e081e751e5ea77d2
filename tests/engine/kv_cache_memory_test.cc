#include "engine/kv_cache_memory.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace inflight {
namespace {

TEST(KvCacheMemory, AutoFractionsAndBytes) {
  EngineConfig c;
  set_kv_cache_memory("auto", Device::kCuda, c);
  EXPECT_DOUBLE_EQ(c.kv_cache_memory_fraction, 0.9);
  set_kv_cache_memory("auto", Device::kCpu, c);
  EXPECT_DOUBLE_EQ(c.kv_cache_memory_fraction, 0.0);
  EXPECT_EQ(c.kv_cache_bytes, int64_t{512} << 20);
  set_kv_cache_memory("0.5", Device::kCpu, c);
  EXPECT_DOUBLE_EQ(c.kv_cache_memory_fraction, 0.5);
  set_kv_cache_memory("2GiB", Device::kCuda, c);
  EXPECT_DOUBLE_EQ(c.kv_cache_memory_fraction, 0.0);
  EXPECT_EQ(c.kv_cache_bytes, int64_t{2} << 30);
  set_kv_cache_memory("1048576", Device::kCuda, c);
  EXPECT_EQ(c.kv_cache_bytes, int64_t{1} << 20);
  EXPECT_TRUE(c.validate().ok());
  for (const char* bad : {"", "-1", "lots", "5TB", "0"}) {
    EXPECT_THROW(set_kv_cache_memory(bad, Device::kCpu, c), Error) << bad;
  }
}

}  // namespace
}  // namespace inflight
