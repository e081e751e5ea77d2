// Every environment variable the project reads, in one place, all prefixed INFLIGHT_.
#pragma once

#include <string>

namespace inflight {

struct EnvConfig {
  // INFLIGHT_LOG_LEVEL: trace|debug|info|warn|error|off.
  std::string log_level = "info";
  // INFLIGHT_NUM_THREADS: CPU backend worker threads; 0 = hardware concurrency.
  int num_threads = 0;
  // INFLIGHT_DATA_DIR: the shared test/benchmark data (tokenizers, templates, prompts).
  std::string data_dir;
  // INFLIGHT_MODEL_DIR: where the default model is looked for (see formats/default_model.h).
  std::string model_dir;
};

// Read once, on first use.
const EnvConfig& env();

}  // namespace inflight
