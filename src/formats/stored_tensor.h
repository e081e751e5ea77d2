// StoredTensor: a weight exactly as a model file stores it, handed out without conversion.
//
// The bytes stay in the file's memory mapping; a backend converts them to the format it keeps
// on its device (Backend::load_weight) row by row, so loading never builds an f32 copy of a
// whole model on the host. Shapes are logical and Hugging Face ordered ([out, in] for linear
// weights); `rows()` is the outermost dimension, each row `cols()` elements, stored in
// `row_bytes()` contiguous bytes (block formats pack a row into whole blocks).
//
// Formats: f32, f16, bf16, GGUF block types (ggml_types.h), fp8 e4m3 with its `scale` tensor
// (per tensor, row or block; weight_scales.h attaches it), and room for the other quantized
// checkpoint formats (fp8 e5m2, int8, packed int4) with their `scale` tensor and group size.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/tensor.h"
#include "formats/ggml_types.h"

namespace inflight {

class MmapFile;

enum class StoredType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,  // with `scale`
  kF8E5M2,  // with `scale`
  kI8,      // with `scale`
  kI4,      // two per byte, low nibble first, with `scale` in groups (block_cols)
  kGgml,    // a GGUF block type: `ggml_type`
};

std::string_view stored_type_name(StoredType type);

struct StoredTensor {
  std::string name;  // canonical (model_files.h)
  Shape shape;
  StoredType type = StoredType::kF32;
  GgmlType ggml_type = GgmlType::kF32;  // when type == kGgml
  const uint8_t* data = nullptr;        // rows() * row_bytes() bytes, bounds checked at open
  // Keeps `data` alive; the mapping it lies in, when it is one (release_pages uses it).
  std::shared_ptr<const void> owner;
  const MmapFile* file = nullptr;
  // > 0: llama.cpp stored the rows of each of these heads interleaved for its RoPE (GGUF q/k of
  // Llama and Mistral); row r of the logical tensor is stored row source_row(r).
  int64_t interleaved_heads = 0;
  // Quantized types: the dequantisation scales (an f32, bf16 or f16 tensor): value = stored *
  // scale, with scale of shape [] or [1] (the whole tensor), [rows()] or [rows(), 1] (per row),
  // or [ceil(rows() / block_rows), ceil(cols() / block_cols)] (blocks; block_rows 1: groups of
  // block_cols along each row). block_rows = block_cols = 0 unless the scales are blocks.
  std::shared_ptr<const StoredTensor> scale;
  int64_t block_rows = 0;
  int64_t block_cols = 0;
  // Bytes from one stored row to the next; 0: row_bytes(). A column window of a wider tensor
  // (formats/stored_slice.h) keeps the rows of the whole tensor.
  int64_t row_stride = 0;
  // A quantized linear weight with static activation scaling: the activations' per-tensor
  // scale (1 element, f32/bf16/f16) the checkpoint was calibrated with; null otherwise.
  std::shared_ptr<const StoredTensor> input_scale;

  int64_t numel() const;
  // The outermost dimension; a 1-D tensor is one row, unless its elements are interleaved.
  int64_t rows() const {
    return shape.size() >= 2 || (interleaved_heads > 0 && !shape.empty()) ? shape[0] : 1;
  }
  int64_t cols() const;
  int64_t row_bytes() const;
  int64_t nbytes() const { return rows() * row_bytes(); }
  int64_t stride() const { return row_stride > 0 ? row_stride : row_bytes(); }
  // Bytes from the first stored byte to the last: nbytes() unless a column window.
  int64_t span_bytes() const { return rows() == 0 ? 0 : (rows() - 1) * stride() + row_bytes(); }
  int64_t source_row(int64_t r) const;
  // Whether the bytes are already a contiguous row-major `dtype` tensor of `shape` (no
  // conversion).
  bool is_plain(DType dtype) const;

  // A host f32 tensor as a StoredTensor (tests, weights made in memory). Shares `t`.
  static StoredTensor from_host(std::string name, const Tensor& t);
};

// Rows [begin, end) of `t` converted (dequantised, un-interleaved) to `dtype` (f32, f16 or
// bf16; or f8_e4m3 for an e4m3 tensor: its bytes as stored, without the scales) into dst,
// (end - begin) * cols() elements, on ThreadPool::global(). FP8 e4m3 to a float type is
// e4m3_to_f32(byte) * scale, the product rounded once to f32 (then to dtype). Throws
// Error(kUnsupported) naming the tensor for a type that cannot be converted, and
// Error(kInvalidArgument) for an FP8 tensor without a scale or with one of the wrong shape.
// NOTE: not from inside a ThreadPool::global() parallel_for.
void convert_rows(const StoredTensor& t, int64_t begin, int64_t end, DType dtype, void* dst);

// The whole tensor as host f32.
Tensor to_host_f32(const StoredTensor& t);

// Tells the kernel that this process is done with the file pages under `t` (they stay in the
// page cache), so a model's mapped files do not count towards resident memory once its weights
// are on the device. No effect for tensors not in a mapping.
void release_pages(const StoredTensor& t);

}  // namespace inflight
