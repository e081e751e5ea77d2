// `inflight generate`: run prompts through the engine.
//
//   inflight generate --prompt "Once upon a time" --max-tokens 32 --temperature 0
//       streams the completion to stdout as it is produced.
//   inflight generate --prompts-file requests.jsonl > results.jsonl
//       one request per line ({"prompt": ..., "max_tokens": ..., "stop": [...], ...}, OpenAI
//       names), all run concurrently; one result line per request, in input order.
//   --device auto|cpu|cuda[:N]   the backend (auto: CUDA when a device is there)
//   --dummy-weights --arch llama-3.1-8b (or --config config.json)
//       random weights of that shape made on the device; prompts as token ids
//       ("prompt_token_ids" lines), or text with --tokenizer FILE.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>

#include "core/check.h"
#include "inflight/engine.h"
#include "tokenizer/tokenizer.h"
#include "tools/command.h"
#include "tools/engine_options.h"
#include "tools/parallel_launch.h"

namespace inflight::tools {
namespace {

struct Options {
  std::string prompt;
  std::string prompts_file;
  int32_t max_tokens = 64;
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  std::optional<uint64_t> seed;
  EngineOptions engine;  // --model, --device, --dummy-weights, the engine's sizes, ...
};
Options opts;

std::unique_ptr<Engine> start_engine() {
  const ModelSource source = model_source(opts.engine);
  const EngineConfig config = engine_config(opts.engine);
  auto engine = Engine::load(source, config);
  INFLIGHT_CHECK_CODE(engine.ok(), ErrorCode::kInvalidArgument, "cannot start the engine: {}",
                      engine.status().to_string());
  return std::move(engine).value();
}

SamplingParams params_from_options() {
  SamplingParams p;
  p.max_tokens = opts.max_tokens;
  p.temperature = opts.temperature;
  p.top_k = opts.top_k;
  p.top_p = opts.top_p;
  p.seed = opts.seed;
  return p;
}

int run_single() {
  auto engine = start_engine();
  const std::shared_ptr<const Tokenizer> tokenizer = engine->tokenizer();
  Request req;
  req.prompt = opts.prompt;
  req.sampling = params_from_options();
  auto handle = engine->enqueue(std::move(req));
  INFLIGHT_CHECK_CODE(handle.ok(), ErrorCode::kInvalidArgument, "{}", handle.status().to_string());
  std::vector<RequestOutput> outs;
  RequestOutput final_out;
  while (!handle->stream->done()) {
    outs.clear();
    handle->stream->wait_pop(outs, std::chrono::milliseconds(100));
    for (const auto& o : outs) {
      std::fwrite(o.text.data(), 1, o.text.size(), stdout);
      std::fflush(stdout);
      if (o.request_finished) final_out = o;
    }
  }
  std::fputc('\n', stdout);
  std::fflush(stdout);
  engine->shutdown();
  if (final_out.request_finished && final_out.finish_reason) {
    const auto& t = final_out.timings;
    const double decode_s = RequestTimings::seconds(t.first_token, t.finished);
    const int32_t n = final_out.usage.completion_tokens;
    std::fprintf(stderr,
                 "[%s] prompt %d tokens, completion %d tokens, TTFT %.3f s, %.1f tokens/s\n",
                 std::string(finish_reason_name(*final_out.finish_reason)).c_str(),
                 final_out.usage.prompt_tokens, n, t.ttft_seconds(),
                 n > 1 && decode_s > 0 ? (n - 1) / decode_s : 0.0);
    if (!final_out.error.empty()) std::fprintf(stderr, "error: %s\n", final_out.error.c_str());
  }
  return final_out.finish_reason == FinishReason::kError ? 1 : 0;
}

// One JSONL line -> Request. Throws Error(kInvalidArgument) naming the line and the key.
Request request_from_json(const nlohmann::json& j, size_t line) {
  INFLIGHT_CHECK_CODE(j.is_object(), ErrorCode::kInvalidArgument, "line {}: expected a JSON object",
                      line);
  Request r;
  r.sampling = params_from_options();
  SamplingParams& p = r.sampling;
  for (const auto& [key, v] : j.items()) {
    try {
      if (key == "prompt")
        r.prompt = v.get<std::string>();
      else if (key == "prompt_token_ids")
        r.prompt_token_ids = v.get<std::vector<int32_t>>();
      else if (key == "max_tokens")
        p.max_tokens = v.get<int32_t>();
      else if (key == "min_tokens")
        p.min_tokens = v.get<int32_t>();
      else if (key == "temperature")
        p.temperature = v.get<float>();
      else if (key == "top_p")
        p.top_p = v.get<float>();
      else if (key == "top_k")
        p.top_k = v.get<int32_t>();
      else if (key == "min_p")
        p.min_p = v.get<float>();
      else if (key == "n")
        p.n = v.get<int32_t>();
      else if (key == "seed")
        p.seed = v.get<uint64_t>();
      else if (key == "stop")
        p.stop = v.is_string() ? std::vector<std::string>{v.get<std::string>()}
                               : v.get<std::vector<std::string>>();
      else if (key == "stop_token_ids")
        p.stop_token_ids = v.get<std::vector<int32_t>>();
      else if (key == "ignore_eos")
        p.ignore_eos = v.get<bool>();
      else if (key == "presence_penalty")
        p.presence_penalty = v.get<float>();
      else if (key == "frequency_penalty")
        p.frequency_penalty = v.get<float>();
      else if (key == "repetition_penalty")
        p.repetition_penalty = v.get<float>();
      else if (key == "logprobs")
        p.logprobs = v.get<int32_t>();
      else if (key == "include_stop_str_in_output")
        p.include_stop_str_in_output = v.get<bool>();
      else if (key == "skip_special_tokens")
        p.skip_special_tokens = v.get<bool>();
      else if (key == "priority")
        r.priority = v.get<int32_t>();
      else
        INFLIGHT_THROW(ErrorCode::kInvalidArgument, "unknown key");
    } catch (const nlohmann::json::exception& e) {
      INFLIGHT_THROW(ErrorCode::kInvalidArgument, "line {}: key '{}': {}", line, key, e.what());
    } catch (const Error&) {
      INFLIGHT_THROW(ErrorCode::kInvalidArgument, "line {}: unknown key '{}'", line, key);
    }
  }
  return r;
}

struct Collected {
  std::vector<RequestOutput> outputs;  // everything the stream produced
  std::string error;                   // enqueue failure
};

nlohmann::json result_json(size_t index, const Collected& c, int32_t n) {
  nlohmann::json j;
  j["index"] = index;
  if (!c.error.empty()) {
    j["finish_reason"] = "error";
    j["error"] = c.error;
    return j;
  }
  std::vector<nlohmann::json> choices(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    choices[static_cast<size_t>(i)] = {
        {"index", i}, {"text", ""}, {"token_ids", nlohmann::json::array()}};
  }
  for (const auto& o : c.outputs) {
    auto& ch = choices[static_cast<size_t>(o.index)];
    ch["text"] = ch["text"].get<std::string>() + o.text;
    for (int32_t t : o.token_ids) ch["token_ids"].push_back(t);
    // With "logprobs": N, per token its logprob and the N most likely [id, logprob].
    for (const TokenLogprob& lp : o.logprobs) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& [id, logprob] : lp.top) top.push_back({id, logprob});
      ch["logprobs"].push_back({{"token_id", lp.token_id}, {"logprob", lp.logprob}, {"top", top}});
    }
    if (o.finish_reason) ch["finish_reason"] = finish_reason_name(*o.finish_reason);
    if (!o.stop_string.empty()) ch["stop"] = o.stop_string;
    if (!o.error.empty()) ch["error"] = o.error;
    if (o.request_finished) {
      const auto& t = o.timings;
      j["usage"] = {{"prompt_tokens", o.usage.prompt_tokens},
                    {"completion_tokens", o.usage.completion_tokens},
                    {"cached_prompt_tokens", o.usage.cached_prompt_tokens}};
      j["timings"] = {{"queue_s", t.queue_seconds()},
                      {"ttft_s", t.ttft_seconds()},
                      {"e2e_s", t.e2e_seconds()},
                      {"decode_s", RequestTimings::seconds(t.first_token, t.finished)}};
    }
  }
  for (const char* key : {"text", "token_ids", "logprobs", "finish_reason", "stop", "error"}) {
    if (choices[0].contains(key)) j[key] = choices[0][key];
  }
  if (n > 1) j["choices"] = choices;
  return j;
}

int run_file() {
  std::ifstream in(opts.prompts_file);
  INFLIGHT_CHECK_CODE(in.good(), ErrorCode::kNotFound, "cannot open '{}'", opts.prompts_file);
  std::vector<Request> requests;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      INFLIGHT_THROW(ErrorCode::kInvalidArgument, "{} line {}: {}", opts.prompts_file, n, e.what());
    }
    requests.push_back(request_from_json(j, n));
  }

  auto engine = start_engine();
  const std::shared_ptr<const Tokenizer> tokenizer = engine->tokenizer();
  std::mutex mutex;
  std::condition_variable cv;
  bool ready = false;
  std::vector<Collected> results(requests.size());
  std::vector<std::shared_ptr<OutputStream>> streams(requests.size());
  std::vector<int32_t> num_choices(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    num_choices[i] = requests[i].sampling.n;
    requests[i].notify = [&] {
      std::lock_guard<std::mutex> lock(mutex);
      ready = true;
      cv.notify_one();
    };
    auto h = engine->enqueue(std::move(requests[i]));
    if (h.ok())
      streams[i] = h->stream;
    else
      results[i].error = h.status().to_string();
  }
  size_t num_open = 0;
  for (const auto& s : streams) num_open += s != nullptr;
  while (num_open > 0) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return ready; });
      ready = false;
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      if (!streams[i]) continue;
      streams[i]->try_pop(results[i].outputs);
      if (streams[i]->done()) {
        streams[i].reset();
        --num_open;
      }
    }
  }
  const EngineStats stats = engine->stats();
  engine->shutdown();
  for (size_t i = 0; i < results.size(); ++i) {
    std::printf("%s\n", result_json(i, results[i], num_choices[i]).dump().c_str());
  }
  std::fprintf(stderr,
               "%zu requests: %llu prompt + %llu generated tokens in %llu steps, %llu "
               "preemptions, prefix cache %llu/%llu tokens\n",
               results.size(), static_cast<unsigned long long>(stats.num_prompt_tokens),
               static_cast<unsigned long long>(stats.num_generation_tokens),
               static_cast<unsigned long long>(stats.num_steps),
               static_cast<unsigned long long>(stats.num_preemptions),
               static_cast<unsigned long long>(stats.num_prefix_cache_hits),
               static_cast<unsigned long long>(stats.num_prefix_cache_queries));
  return 0;
}

void setup(CLI::App& app) {
  add_engine_options(app, opts.engine);
  auto* prompt = app.add_option("--prompt", opts.prompt,
                                "Prompt text; the completion streams "
                                "to stdout");
  auto* file = app.add_option("--prompts-file", opts.prompts_file,
                              "JSONL requests, one per line; results as JSONL on stdout");
  prompt->excludes(file);
  app.add_option("--max-tokens", opts.max_tokens, "Most tokens generated per request")
      ->check(CLI::PositiveNumber);
  app.add_option("--temperature", opts.temperature, "0 = greedy")->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", opts.top_k, "Keep the k most likely tokens (0 = all)");
  app.add_option("--top-p", opts.top_p, "Nucleus sampling mass, (0, 1]");
  app.add_option("--seed", opts.seed, "Seed for reproducible sampling");
}

int run() {
  INFLIGHT_CHECK_CODE(!opts.prompt.empty() || !opts.prompts_file.empty(),
                      ErrorCode::kInvalidArgument, "give --prompt TEXT or --prompts-file FILE");
  if (const std::optional<int> rc = start_parallel_job(model_source(opts.engine))) return *rc;
  return opts.prompts_file.empty() ? run_single() : run_file();
}

const bool kRegistered =
    register_command({"generate", "Generate completions with the engine", &setup, &run});

}  // namespace
}  // namespace inflight::tools
