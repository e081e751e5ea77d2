// Where the benchmarks look for their inputs when the command line does not say.
#pragma once

#include <string>

namespace inflight::bench {

// The prompt corpus: $INFLIGHT_DATA_DIR/prompts/prompts_sharegpt_like.json.xz, else the shared
// data beside the source tree.
std::string default_prompts_path();

}  // namespace inflight::bench
