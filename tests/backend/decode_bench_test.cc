// Batch-1 decode and prefill throughput of the CPU backend on the default model. Disabled by
// default (a measurement, not a check); run with
//   backend_cpu_test --gtest_also_run_disabled_tests --gtest_filter='*CpuThroughput*'
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "backend/cpu/cpu_backend.h"
#include "backend/tiny_llama.h"
#include "core/thread_pool.h"
#include "formats/model_files.h"
#include "model/registry.h"
#include "test_data.h"

namespace inflight {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU seconds of the whole process: on a shared machine, wall time also counts other jobs.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

TEST(CpuThroughput, DISABLED_SmolLM2DecodeBatch1) {
  INFLIGHT_REQUIRE_MODEL(path);
  const auto files = ModelFiles::open(path);
  CpuBackend backend;
  const std::unique_ptr<Model> model_owner = load_model(*files, backend);
  Model& model = *model_owner;
  const int32_t block_size = 16, prompt_len = 256, decode_steps = 64;
  const int64_t num_blocks = (prompt_len + decode_steps) / block_size + 2;
  KvCache cache = model.make_kv_cache(num_blocks, block_size);
  testing::RandomBlocks pool(num_blocks, 1);
  testing::SeqState seq{testing::random_tokens(prompt_len, model.config().vocab_size, 1), {}, 0};

  ForwardBatch prefill = testing::make_step({{&seq, prompt_len}}, block_size, pool);
  prefill.logits_indices = {prompt_len - 1};  // as a server prefills: the last row only
  auto t0 = Clock::now();
  model.forward(prefill, cache);
  const double prefill_s = seconds_since(t0);

  std::vector<double> steps;
  const double cpu0 = process_cpu_seconds();
  for (int32_t i = 0; i < decode_steps; ++i) {
    seq.tokens.push_back(static_cast<int32_t>(i * 7919 % model.config().vocab_size));
    t0 = Clock::now();
    model.forward(testing::make_step({{&seq, 1}}, block_size, pool), cache);
    steps.push_back(seconds_since(t0));
  }
  const double cpu_per_token = (process_cpu_seconds() - cpu0) / decode_steps;
  std::sort(steps.begin(), steps.end());
  const double median = steps[steps.size() / 2];
  std::printf(
      "threads %d | prefill %d tokens: %.2f s (%.0f tokens/s) | decode batch 1: median "
      "%.1f ms/token = %.1f tokens/s, %.1f process CPU-ms/token (context %d..%d)\n",
      ThreadPool::global().num_threads(), prompt_len, prefill_s, prompt_len / prefill_s,
      median * 1e3, 1.0 / median, cpu_per_token * 1e3, prompt_len, prompt_len + decode_steps);
}

}  // namespace
}  // namespace inflight
