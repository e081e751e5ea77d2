// Where the benchmarks look for their inputs when the command line does not say.
#pragma once

#include <string>

namespace inflight::bench {

// The default model: $INFLIGHT_MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf, else models/ in the
// source tree (where scripts/fetch_model.sh puts it).
std::string default_model_path();

// The prompt corpus: $INFLIGHT_DATA_DIR/prompts/prompts_sharegpt_like.json.xz, else the shared
// data beside the source tree.
std::string default_prompts_path();

}  // namespace inflight::bench
