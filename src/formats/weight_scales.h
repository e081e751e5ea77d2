// Weight scales: joins a quantized checkpoint's FP8 weight with the tensors that give it meaning.
//
// For a linear module `<module>` whose `<module>.weight` is stored F8_E4M3 ([N, K]):
//   scale        `<module>.weight_scale` (`<module>.weight_scale_inv` for native block FP8,
//                quant_method "fp8"), f32/bf16/f16, of shape
//                  per tensor   [] or [1]
//                  per channel  [N] or [N, 1]
//                  blocks       [ceil(N / block_rows), ceil(K / block_cols)]
//   input_scale  `<module>.input_scale`, 1 element, when activations are kStaticTensor.
// Shapes and types are checked here; the values (zero, negative, NaN, inf) are the model
// layer's to check when it loads them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "formats/quantization.h"
#include "formats/stored_tensor.h"

namespace inflight {

// A tensor of the same checkpoint by name, as stored; nullopt when there is none.
using FindStoredTensor = std::function<std::optional<StoredTensor>(const std::string& name)>;

// Attaches `scale` (and block_rows/block_cols for block scales) and `input_scale` to an
// F8_E4M3 `weight`, as `q` says. Tensors of other types are left as they are. Throws
// Error(kInvalidFile) naming the tensors (and `where`, the checkpoint) for an FP8 weight in a
// checkpoint that declares no quantization, or whose module `q` excludes, a missing scale
// tensor, or a scale of the wrong type or shape (the message gives the expected shape).
void attach_weight_scales(StoredTensor& weight, const Quantization& q, const FindStoredTensor& find,
                          std::string_view where);

}  // namespace inflight
