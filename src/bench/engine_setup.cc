#include "bench/engine_setup.h"

#include <chrono>
#include <random>

#include "core/check.h"
#include "tokenizer/tokenizer.h"

namespace inflight::bench {

LoadedEngine load_engine(const EngineSetupOptions& o) {
  const auto begin = std::chrono::steady_clock::now();
  EngineConfig config = o.config;
  if (const Status s = parse_kv_cache_memory(o.kv_cache_memory, config); !s.ok()) {
    INFLIGHT_THROW(ErrorCode::kInvalidArgument, "--kv-cache-memory: {}", s.message());
  }
  auto engine = Engine::load(o.source, config);
  INFLIGHT_CHECK_CODE(engine.ok(), ErrorCode::kInvalidArgument, "cannot start the engine: {}",
                      engine.status().to_string());
  LoadedEngine out;
  out.engine = std::move(engine).value();
  out.tokenizer = out.engine->tokenizer();
  out.model = out.engine->model_name();
  out.load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return out;
}

std::vector<std::vector<int32_t>> random_prompt_ids(const Tokenizer* tokenizer, int64_t vocab_size,
                                                    int32_t num, int32_t len, uint64_t seed) {
  INFLIGHT_CHECK_CODE(num >= 1 && len >= 1, ErrorCode::kInvalidArgument,
                      "need at least one prompt of at least one token (got {} x {})", num, len);
  std::vector<int32_t> ordinary;
  if (tokenizer == nullptr) {
    for (int64_t id = 0; id < vocab_size; ++id) ordinary.push_back(static_cast<int32_t>(id));
  } else {
    for (int32_t id = 0; id < tokenizer->vocab_size() && id < vocab_size; ++id) {
      const TokenType type = tokenizer->token_type(id);
      if (!tokenizer->is_special(id) && type != TokenType::kUnused && type != TokenType::kUnknown) {
        ordinary.push_back(id);
      }
    }
  }
  INFLIGHT_CHECK_CODE(!ordinary.empty(), ErrorCode::kInvalidArgument,
                      "no ordinary token ids to draw prompts from");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, ordinary.size() - 1);
  std::vector<std::vector<int32_t>> prompts(num);
  for (auto& p : prompts) {
    p.resize(len);
    for (auto& id : p) id = ordinary[pick(rng)];
  }
  return prompts;
}

Request fixed_length_request(std::vector<int32_t> prompt_ids, int32_t output_len) {
  Request r;
  r.prompt_token_ids = std::move(prompt_ids);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = output_len;
  r.sampling.ignore_eos = true;
  return r;
}

}  // namespace inflight::bench
