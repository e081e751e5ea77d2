// EngineLog: the periodic engine line of a server, as vLLM prints it:
//
//   engine: prompt 1520.3 tok/s, generation 4210.7 tok/s, running 64, waiting 3,
//           KV cache 41.2%, prefix cache hit rate 37.5%, preemptions 0
//
// Throughputs and the hit rate are over the interval since the last line. Lines stop while the
// engine is idle (one last line after activity ends). With several models served, one line per
// model, starting with its name ("[tiny] engine: ..."). Owns a thread; the destructor joins it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "inflight/stats.h"

namespace inflight::frontend {
class ModelRegistry;
}

namespace inflight::server {

class EngineLog {
 public:
  // Logs every `interval_s` seconds the stats of the models `registry` has loaded.
  EngineLog(const frontend::ModelRegistry& registry, double interval_s);
  ~EngineLog();
  EngineLog(const EngineLog&) = delete;
  EngineLog& operator=(const EngineLog&) = delete;

  // The line for the interval from `before` to `now`, `seconds` long; empty when both ends are
  // idle (nothing running, waiting or computed).
  static std::string line(const EngineStats& before, const EngineStats& now, double seconds);

 private:
  void run();

  const frontend::ModelRegistry& registry_;
  const std::chrono::duration<double> interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace inflight::server
