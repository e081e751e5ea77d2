#include "server/engine_log.h"

#include <fmt/format.h>

#include "core/logging.h"
#include "frontend/frontend.h"
#include "frontend/model_registry.h"
#include "inflight/engine.h"

namespace inflight::server {

EngineLog::EngineLog(const frontend::ModelRegistry& registry, double interval_s)
    : registry_(registry), interval_(interval_s), thread_([this] { run(); }) {}

EngineLog::~EngineLog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::string EngineLog::line(const EngineStats& before, const EngineStats& now, double seconds) {
  const uint64_t prompt = now.num_prompt_tokens - before.num_prompt_tokens;
  const uint64_t generated = now.num_generation_tokens - before.num_generation_tokens;
  const uint64_t computed = now.num_computed_tokens - before.num_computed_tokens;
  const bool busy = now.num_running + now.num_waiting > 0 || computed > 0;
  const bool was_busy = before.num_running + before.num_waiting > 0;
  if (!busy && !was_busy) return {};
  const uint64_t queries = now.num_prefix_cache_queries - before.num_prefix_cache_queries;
  const uint64_t hits = now.num_prefix_cache_hits - before.num_prefix_cache_hits;
  const double s = seconds > 0 ? seconds : 1.0;
  return fmt::format(
      "engine: prompt {:.1f} tok/s, generation {:.1f} tok/s, running {}, waiting {}, KV cache "
      "{:.1f}%, prefix cache hit rate {:.1f}%, preemptions {}",
      static_cast<double>(prompt) / s, static_cast<double>(generated) / s, now.num_running,
      now.num_waiting, now.kv_usage * 100.0,
      queries > 0 ? 100.0 * static_cast<double>(hits) / static_cast<double>(queries) : 0.0,
      now.num_preemptions - before.num_preemptions);
}

void EngineLog::run() {
  using Clock = std::chrono::steady_clock;
  struct Last {
    EngineStats stats;
    Clock::time_point time;
  };
  std::map<const frontend::Frontend*, Last> last;  // per model loaded (a reload is another)
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
    const auto frontends = registry_.frontends();
    std::map<const frontend::Frontend*, Last> next;
    for (const auto& fe : frontends) {
      const auto model = fe->model_or_null();
      if (model == nullptr) continue;
      Last now{model->engine->stats(), Clock::now()};
      if (auto it = last.find(fe.get()); it != last.end()) {
        const std::string text =
            line(it->second.stats, now.stats,
                 std::chrono::duration<double>(now.time - it->second.time).count());
        if (!text.empty()) {
          const std::string who =
              frontends.size() > 1 ? "[" + fe->options().served_model_name + "] " : "";
          INFLIGHT_LOG_INFO("{}{}", who, text);
        }
      }
      next.emplace(fe.get(), std::move(now));
    }
    last = std::move(next);
  }
}

}  // namespace inflight::server
