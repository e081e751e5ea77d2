#include "bench/defaults.h"

#include "core/env.h"

namespace inflight::bench {

namespace {
constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr const char* kPromptsFile = "prompts/prompts_sharegpt_like.json.xz";
}  // namespace

std::string default_model_path() {
  const std::string dir = env().model_dir.empty() ? INFLIGHT_SOURCE_DIR "/models" : env().model_dir;
  return dir + "/" + kDefaultModelFile;
}

std::string default_prompts_path() {
  const std::string dir =
      env().data_dir.empty() ? INFLIGHT_SOURCE_DIR "/../shared/data" : env().data_dir;
  return dir + "/" + kPromptsFile;
}

}  // namespace inflight::bench
