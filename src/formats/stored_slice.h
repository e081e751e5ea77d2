// Slices of a stored tensor without copying: the rows or columns one rank of a tensor-parallel
// model holds (model/tensor_parallel.h). A slice is a StoredTensor over the same bytes (a column
// window keeps the whole tensor's row stride) with its dequantisation scales sliced to match,
// so converting it (convert_rows, Backend::load_weight) reads only the slice.
#pragma once

#include <cstdint>

#include "formats/stored_tensor.h"

namespace inflight {

// Rows [begin, end) of `t` (of a 1-D tensor: elements). Rows of llama.cpp's interleaved q/k
// heads and of block-scaled FP8 weights must be cut at head and block boundaries. Throws
// Error(kUnsupported) naming the tensor for a cut the format does not allow, and
// Error(kInvalidArgument) for a range outside the tensor.
StoredTensor slice_rows(const StoredTensor& t, int64_t begin, int64_t end);

// Columns [begin, end) of a 2-D tensor `t` (the input features of a linear weight). Block
// formats (GGUF blocks, FP8 scale blocks) must be cut at block boundaries. Throws as slice_rows.
StoredTensor slice_cols(const StoredTensor& t, int64_t begin, int64_t end);

}  // namespace inflight
