#include "bench/defaults.h"

#include "core/env.h"

namespace inflight::bench {

namespace {
constexpr const char* kPromptsFile = "prompts/prompts_sharegpt_like.json.xz";
}  // namespace

std::string default_prompts_path() {
  const std::string dir =
      env().data_dir.empty() ? INFLIGHT_SOURCE_DIR "/../shared/data" : env().data_dir;
  return dir + "/" + kPromptsFile;
}

}  // namespace inflight::bench
