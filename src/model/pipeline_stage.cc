#include "model/pipeline_stage.h"

#include <algorithm>

#include "core/check.h"

namespace inflight {

PipelineStage PipelineStage::of(const ModelConfig& config, int stage, int stages) {
  INFLIGHT_CHECK_CODE(stages >= 1 && stage >= 0 && stage < stages, ErrorCode::kInvalidArgument,
                      "pipeline stage {} of {}", stage, stages);
  const int64_t layers = config.num_layers;
  INFLIGHT_CHECK_CODE(stages <= layers, ErrorCode::kUnsupported,
                      "pipeline parallel size {} exceeds the model's {} layers (num_hidden_layers)",
                      stages, layers);
  const int64_t base = layers / stages, extra = layers % stages;
  PipelineStage s;
  s.stage = stage;
  s.stages = stages;
  s.layer_begin = stage * base + std::min<int64_t>(stage, extra);
  s.layer_end = s.layer_begin + base + (stage < extra ? 1 : 0);
  return s;
}

}  // namespace inflight
