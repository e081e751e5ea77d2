#include "server/engine_log.h"

#include <gtest/gtest.h>

namespace inflight::server {
namespace {

TEST(EngineLog, RatesOverTheInterval) {
  EngineStats before, now;
  before.num_prompt_tokens = 100;
  before.num_generation_tokens = 1000;
  before.num_prefix_cache_queries = 50;
  before.num_prefix_cache_hits = 10;
  now.num_prompt_tokens = 300;       // +200 in 2 s
  now.num_generation_tokens = 1500;  // +500
  now.num_computed_tokens = 700;
  now.num_prefix_cache_queries = 250;  // +200 queries, +50 hits
  now.num_prefix_cache_hits = 60;
  now.num_running = 8;
  now.num_waiting = 2;
  now.kv_usage = 0.25;
  now.num_preemptions = 1;
  EXPECT_EQ(EngineLog::line(before, now, 2.0),
            "engine: prompt 100.0 tok/s, generation 250.0 tok/s, running 8, waiting 2, KV cache "
            "25.0%, prefix cache hit rate 25.0%, preemptions 1");
}

TEST(EngineLog, QuietWhileIdleButReportsTheEndOfActivity) {
  EngineStats idle;
  EXPECT_EQ(EngineLog::line(idle, idle, 10.0), "");
  EngineStats busy;
  busy.num_running = 3;
  EXPECT_NE(EngineLog::line(idle, busy, 10.0), "");
  EXPECT_NE(EngineLog::line(busy, idle, 10.0), "");  // the interval in which it ended
}

}  // namespace
}  // namespace inflight::server
