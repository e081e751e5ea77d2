#include "formats/stored_slice.h"

#include <memory>
#include <string>

#include "core/check.h"

namespace inflight {
namespace {

void check_range(const StoredTensor& t, int64_t begin, int64_t end, int64_t size,
                 const char* what) {
  INFLIGHT_CHECK_CODE(0 <= begin && begin < end && end <= size, ErrorCode::kInvalidArgument,
                      "tensor '{}': {} [{}, {}) outside [0, {})", t.name, what, begin, end, size);
}

// Whether [begin, end) of a dimension of `size` starts and ends on a multiple of `block`
// (or at the end).
bool on_blocks(int64_t begin, int64_t end, int64_t size, int64_t block) {
  return begin % block == 0 && (end % block == 0 || end == size);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Elements per storage unit of a column (GGUF blocks pack block_size elements in type_size
// bytes; every other type: one element) and the bytes of one unit.
struct ColumnUnit {
  int64_t elements;
  int64_t bytes;
};
ColumnUnit column_unit(const StoredTensor& t) {
  switch (t.type) {
    case StoredType::kF32:
      return {1, 4};
    case StoredType::kF16:
    case StoredType::kBF16:
      return {1, 2};
    case StoredType::kF8E4M3:
    case StoredType::kF8E5M2:
    case StoredType::kI8:
      return {1, 1};
    case StoredType::kI4:
      return {2, 1};
    case StoredType::kGgml: {
      const GgmlTypeTraits* traits = ggml_type_traits(static_cast<uint32_t>(t.ggml_type));
      INFLIGHT_CHECK_CODE(traits != nullptr, ErrorCode::kInvalidFile, "tensor '{}': unknown type",
                          t.name);
      return {traits->block_size, traits->type_size};
    }
  }
  return {1, 1};
}

std::string sliced_name(const StoredTensor& t, const char* what, int64_t begin, int64_t end) {
  return t.name + "[" + what + " " + std::to_string(begin) + ":" + std::to_string(end) + "]";
}

std::shared_ptr<const StoredTensor> share(StoredTensor t) {
  return std::make_shared<const StoredTensor>(std::move(t));
}

// The scales of `t` for its rows [begin, end) (rows == true) or columns [begin, end).
std::shared_ptr<const StoredTensor> slice_scales(const StoredTensor& t, bool rows, int64_t begin,
                                                 int64_t end) {
  if (t.scale == nullptr) return nullptr;
  const StoredTensor& s = *t.scale;
  if (t.block_rows > 0 || t.block_cols > 0) {
    const int64_t block = rows ? t.block_rows : t.block_cols;
    const int64_t size = rows ? t.rows() : t.cols();
    INFLIGHT_CHECK_CODE(block > 0 && on_blocks(begin, end, size, block), ErrorCode::kUnsupported,
                        "tensor '{}': {} [{}, {}) of a tensor scaled in {}x{} blocks cuts a block "
                        "(choose a parallel size that divides the {} into whole blocks)",
                        t.name, rows ? "rows" : "columns", begin, end, t.block_rows, t.block_cols,
                        rows ? "rows" : "columns");
    return share(rows ? slice_rows(s, begin / block, ceil_div(end, block))
                      : slice_cols(s, begin / block, ceil_div(end, block)));
  }
  if (s.numel() == 1 || !rows) return t.scale;  // one scale, or one per row for a column slice
  return share(slice_rows(s, begin, end));      // one per row
}

}  // namespace

StoredTensor slice_rows(const StoredTensor& t, int64_t begin, int64_t end) {
  if (t.shape.size() == 1 && t.interleaved_heads == 0) {  // elements of a vector
    StoredTensor row = t;
    row.shape = {1, t.shape[0]};
    StoredTensor out = slice_cols(row, begin, end);
    out.shape = {end - begin};
    return out;
  }
  INFLIGHT_CHECK_CODE(t.shape.size() == 2 || t.shape.size() == 1, ErrorCode::kUnsupported,
                      "tensor '{}': rows of a {}-D tensor cannot be sliced", t.name,
                      t.shape.size());
  check_range(t, begin, end, t.rows(), "rows");
  StoredTensor out = t;
  out.name = sliced_name(t, "rows", begin, end);
  out.shape[0] = end - begin;
  out.data = t.data + begin * t.stride();
  out.row_stride = t.stride();
  if (t.interleaved_heads > 0) {
    const int64_t head_dim = t.rows() / t.interleaved_heads;
    INFLIGHT_CHECK_CODE(begin % head_dim == 0 && end % head_dim == 0, ErrorCode::kUnsupported,
                        "tensor '{}': rows [{}, {}) cut a head of {} rows", t.name, begin, end,
                        head_dim);
    out.interleaved_heads = (end - begin) / head_dim;
  }
  out.scale = slice_scales(t, /*rows=*/true, begin, end);
  return out;
}

StoredTensor slice_cols(const StoredTensor& t, int64_t begin, int64_t end) {
  INFLIGHT_CHECK_CODE(t.shape.size() == 2, ErrorCode::kUnsupported,
                      "tensor '{}': columns of a {}-D tensor cannot be sliced", t.name,
                      t.shape.size());
  check_range(t, begin, end, t.cols(), "columns");
  const ColumnUnit unit = column_unit(t);
  INFLIGHT_CHECK_CODE(begin % unit.elements == 0 && end % unit.elements == 0,
                      ErrorCode::kUnsupported,
                      "tensor '{}': columns [{}, {}) cut its storage blocks of {} elements (choose "
                      "a parallel size that divides the columns into whole blocks)",
                      t.name, begin, end, unit.elements);
  StoredTensor out = t;
  out.name = sliced_name(t, "cols", begin, end);
  out.shape[1] = end - begin;
  out.data = t.data + begin / unit.elements * unit.bytes;
  out.row_stride = t.stride();
  out.scale = slice_scales(t, /*rows=*/false, begin, end);
  return out;
}

}  // namespace inflight
