// Pipeline parallelism: what stage s of P holds of a model. The layers are split into P
// contiguous ranges in order (the first L mod P stages one layer more); the first stage also
// holds the embedding, the last the final norm and the LM head (and the embedding too when the
// head is tied to it). A stage passes its residual stream (the residual and the last sublayer's
// output, not yet added) to the next.
#pragma once

#include <cstdint>

#include "formats/model_config.h"

namespace inflight {

struct PipelineStage {
  int stage = 0;
  int stages = 1;
  int64_t layer_begin = 0;
  int64_t layer_end = 0;

  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
  int64_t num_layers() const { return layer_end - layer_begin; }

  // Stage `stage` of `stages` over config.num_layers layers. Throws Error(kUnsupported) when
  // there are more stages than layers.
  static PipelineStage of(const ModelConfig& config, int stage, int stages);
};

}  // namespace inflight
