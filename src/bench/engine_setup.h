// Building an Engine in-process for `inflight bench offline` and `inflight bench latency`, and
// the request set they share: random prompts given as token ids (no text round trip: the
// engine is measured, not the tokenizer), ignore_eos so every answer has exactly the asked
// length, greedy sampling.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inflight/config.h"
#include "inflight/engine.h"

namespace inflight {
class Tokenizer;
}

namespace inflight::bench {

struct EngineSetupOptions {
  ModelSource source;  // a model path, or dummy weights of an architecture
  // "auto" | bytes | a fraction (inflight/config.h parse_kv_cache_memory).
  std::string kv_cache_memory = "auto";
  EngineConfig config;
};

struct LoadedEngine {
  std::unique_ptr<Engine> engine;
  std::shared_ptr<const Tokenizer> tokenizer;  // null with dummy weights
  std::string model;                           // what was loaded (path or arch), for reports
  double load_seconds = 0.0;
};

// Engine::load; throws Error(kInvalidArgument) with its status when it fails.
LoadedEngine load_engine(const EngineSetupOptions& options);

// `num` prompts of `len` random token ids each (seeded): ordinary tokens of `tokenizer`, or any
// id below `vocab_size` without one (dummy weights).
std::vector<std::vector<int32_t>> random_prompt_ids(const Tokenizer* tokenizer, int64_t vocab_size,
                                                    int32_t num, int32_t len, uint64_t seed);

// A greedy request for exactly `output_len` tokens.
Request fixed_length_request(std::vector<int32_t> prompt_ids, int32_t output_len);

}  // namespace inflight::bench
