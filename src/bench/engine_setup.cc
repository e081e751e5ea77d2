#include "bench/engine_setup.h"

#include <chrono>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/check.h"
#include "engine/llama_runner.h"
#include "tokenizer/tokenizer.h"

namespace inflight::bench {

LoadedEngine load_engine(const EngineSetupOptions& o) {
  INFLIGHT_CHECK_CODE(!o.dummy_weights, ErrorCode::kUnsupported,
                      "--dummy-weights (--arch {}) is not available yet: random device-side "
                      "weights arrive with the CUDA backend; pass --model PATH",
                      o.arch.empty() ? "?" : o.arch);
  INFLIGHT_CHECK_CODE(o.device == "cpu", ErrorCode::kUnsupported,
                      "device '{}' has no backend in this build (available: cpu)", o.device);
  INFLIGHT_CHECK_CODE(!o.model_path.empty(), ErrorCode::kInvalidArgument, "no model given");
  const auto begin = std::chrono::steady_clock::now();
  LoadedEngine out;
  out.model = o.model_path;
  out.tokenizer = std::shared_ptr<const Tokenizer>(Tokenizer::from_path(o.model_path));
  auto runner = LlamaRunner::load(std::make_unique<CpuBackend>(), o.model_path);
  auto engine = Engine::create(o.config, std::move(runner), out.tokenizer);
  INFLIGHT_CHECK_CODE(engine.ok(), ErrorCode::kInvalidArgument, "cannot start the engine: {}",
                      engine.status().to_string());
  out.engine = std::move(engine).value();
  out.load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return out;
}

std::vector<std::vector<int32_t>> random_prompt_ids(const Tokenizer& tokenizer, int32_t num,
                                                    int32_t len, uint64_t seed) {
  INFLIGHT_CHECK_CODE(num >= 1 && len >= 1, ErrorCode::kInvalidArgument,
                      "need at least one prompt of at least one token (got {} x {})", num, len);
  std::vector<int32_t> ordinary;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const TokenType type = tokenizer.token_type(id);
    if (!tokenizer.is_special(id) && type != TokenType::kUnused && type != TokenType::kUnknown) {
      ordinary.push_back(id);
    }
  }
  INFLIGHT_CHECK_CODE(!ordinary.empty(), ErrorCode::kInvalidArgument,
                      "the tokenizer has no ordinary tokens");
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
