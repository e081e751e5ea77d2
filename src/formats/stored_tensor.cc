#include "formats/stored_tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/fp8.h"
#include "core/mmap_file.h"
#include "core/thread_pool.h"

namespace inflight {
namespace {

// The ggml type that reads a stored type (f32/f16/bf16 are ggml types of block size 1).
GgmlType as_ggml(const StoredTensor& t) {
  switch (t.type) {
    case StoredType::kF32:
      return GgmlType::kF32;
    case StoredType::kF16:
      return GgmlType::kF16;
    case StoredType::kBF16:
      return GgmlType::kBF16;
    case StoredType::kGgml:
      return t.ggml_type;
    default:
      break;
  }
  INFLIGHT_THROW(ErrorCode::kUnsupported, "tensor '{}': stored type {} cannot be converted yet",
                 t.name, stored_type_name(t.type));
}

// Elements per parallel chunk: large enough that scheduling is noise.
constexpr int64_t kChunkElements = int64_t{1} << 16;

// The scales of an FP8 tensor as f32 over a grid of blocks: stored row r, column c is scaled by
// values[(r / block_rows) * grid_cols + c / block_cols]. One scale for the tensor is one block
// of rows() x cols(); one per row is blocks of 1 x cols().
struct ScaleGrid {
  std::vector<float> values;
  int64_t block_rows = 1, block_cols = 1, grid_cols = 1;
};

// Element (row, col) of a f32, bf16 or f16 tensor (file bytes need not be aligned).
float float_at(const StoredTensor& s, int64_t row, int64_t col) {
  uint32_t f32 = 0;
  uint16_t half = 0;
  const uint8_t* p = s.data + row * s.stride();
  switch (s.type) {
    case StoredType::kF32: {
      std::memcpy(&f32, p + col * 4, 4);
      float v;
      std::memcpy(&v, &f32, 4);
      return v;
    }
    case StoredType::kBF16:
      std::memcpy(&half, p + col * 2, 2);
      return bf16_to_f32(half);
    case StoredType::kF16:
      std::memcpy(&half, p + col * 2, 2);
      return f16_to_f32(half);
    default:
      break;
  }
  INFLIGHT_THROW(ErrorCode::kInvalidArgument, "scale '{}' is {}; scales must be f32, bf16 or f16",
                 s.name, stored_type_name(s.type));
}

ScaleGrid scale_grid(const StoredTensor& t) {
  INFLIGHT_CHECK_CODE(t.scale != nullptr, ErrorCode::kInvalidArgument,
                      "tensor '{}': {} weights need a scale tensor", t.name,
                      stored_type_name(t.type));
  const StoredTensor& s = *t.scale;
  const int64_t rows = t.rows(), cols = t.cols(), n = s.numel();
  ScaleGrid g;
  if (t.block_rows > 0 || t.block_cols > 0) {
    INFLIGHT_CHECK_CODE(t.block_rows > 0 && t.block_cols > 0, ErrorCode::kInvalidArgument,
                        "tensor '{}': block sizes {}x{}", t.name, t.block_rows, t.block_cols);
    g.block_rows = t.block_rows;
    g.block_cols = t.block_cols;
    g.grid_cols = (cols + t.block_cols - 1) / t.block_cols;
    const int64_t grid_rows = (rows + t.block_rows - 1) / t.block_rows;
    INFLIGHT_CHECK_CODE(s.shape == (Shape{grid_rows, g.grid_cols}), ErrorCode::kInvalidArgument,
                        "tensor '{}': block scales '{}' must be [{}, {}] for {}x{} blocks", t.name,
                        s.name, grid_rows, g.grid_cols, t.block_rows, t.block_cols);
  } else if (n == 1) {
    g.block_rows = std::max<int64_t>(rows, 1);
    g.block_cols = std::max<int64_t>(cols, 1);
  } else {
    INFLIGHT_CHECK_CODE(n == rows, ErrorCode::kInvalidArgument,
                        "tensor '{}': scale '{}' has {} elements; expected 1 or one per row ({})",
                        t.name, s.name, n, rows);
    g.block_cols = std::max<int64_t>(cols, 1);
  }
  g.values.resize(static_cast<size_t>(n));
  const int64_t scale_cols = s.cols();
  for (int64_t i = 0; i < n; ++i) {
    g.values[static_cast<size_t>(i)] = float_at(s, i / scale_cols, i % scale_cols);
  }
  return g;
}

// Stored row `src` of an FP8 e4m3 tensor dequantised: out[c] = e4m3(byte c) * scale(row, c).
void dequantize_e4m3_row(const uint8_t* src, int64_t row, int64_t cols, const ScaleGrid& g,
                         float* out) {
  const float* table = e4m3_table();
  const float* scales = g.values.data() + (row / g.block_rows) * g.grid_cols;
  for (int64_t c0 = 0, b = 0; c0 < cols; c0 += g.block_cols, ++b) {
    const float scale = scales[b];
    const int64_t c1 = std::min(cols, c0 + g.block_cols);
    for (int64_t c = c0; c < c1; ++c) out[c] = table[src[c]] * scale;
  }
}

}  // namespace

std::string_view stored_type_name(StoredType type) {
  switch (type) {
    case StoredType::kF32:
      return "f32";
    case StoredType::kF16:
      return "f16";
    case StoredType::kBF16:
      return "bf16";
    case StoredType::kF8E4M3:
      return "f8_e4m3";
    case StoredType::kF8E5M2:
      return "f8_e5m2";
    case StoredType::kI8:
      return "i8";
    case StoredType::kI4:
      return "i4";
    case StoredType::kGgml:
      return "ggml";
  }
  return "?";
}

int64_t StoredTensor::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

int64_t StoredTensor::cols() const {
  const int64_t r = rows();
  return r == 0 ? 0 : numel() / r;
}

int64_t StoredTensor::row_bytes() const {
  const int64_t c = cols();
  switch (type) {
    case StoredType::kF32:
      return c * 4;
    case StoredType::kF16:
    case StoredType::kBF16:
      return c * 2;
    case StoredType::kF8E4M3:
    case StoredType::kF8E5M2:
    case StoredType::kI8:
      return c;
    case StoredType::kI4:
      return (c + 1) / 2;
    case StoredType::kGgml: {
      const GgmlTypeTraits* traits = ggml_type_traits(static_cast<uint32_t>(ggml_type));
      INFLIGHT_CHECK_CODE(traits != nullptr, ErrorCode::kInvalidFile, "tensor '{}': unknown type",
                          name);
      return c / traits->block_size * traits->type_size;
    }
  }
  return 0;
}

int64_t StoredTensor::source_row(int64_t r) const {
  if (interleaved_heads == 0) return r;
  // Hugging Face row (h, s * half + i) was stored as row (h, 2 i + s).
  const int64_t head_dim = rows() / interleaved_heads, half = head_dim / 2;
  const int64_t h = r / head_dim, j = r % head_dim;
  return h * head_dim + 2 * (j % half) + j / half;
}

bool StoredTensor::is_plain(DType dtype) const {
  if (interleaved_heads != 0 || scale != nullptr || stride() != row_bytes()) return false;
  switch (type) {
    case StoredType::kF32:
      return dtype == DType::kF32;
    case StoredType::kF16:
      return dtype == DType::kF16;
    case StoredType::kBF16:
      return dtype == DType::kBF16;
    default:
      return false;
  }
}

StoredTensor StoredTensor::from_host(std::string name, const Tensor& t) {
  INFLIGHT_CHECK_CODE(t.defined() && t.device() == Device::kCpu && t.dtype() == DType::kF32,
                      ErrorCode::kInvalidArgument, "weight '{}' must be a host f32 tensor", name);
  StoredTensor s;
  s.name = std::move(name);
  s.shape = t.shape();
  s.type = StoredType::kF32;
  s.data = static_cast<const uint8_t*>(t.raw());
  s.owner = t.owner();
  return s;
}

void convert_rows(const StoredTensor& t, int64_t begin, int64_t end, DType dtype, void* dst) {
  INFLIGHT_CHECK_CODE(0 <= begin && begin <= end && end <= t.rows(), ErrorCode::kInvalidArgument,
                      "tensor '{}': rows [{}, {}) outside [0, {})", t.name, begin, end, t.rows());
  if (dtype == DType::kF8E4M3) {  // e4m3 kept as stored: its scales travel separately
    INFLIGHT_CHECK_CODE(t.type == StoredType::kF8E4M3 && t.interleaved_heads == 0,
                        ErrorCode::kUnsupported, "tensor '{}': {} cannot be kept as f8_e4m3",
                        t.name, stored_type_name(t.type));
    auto* out = static_cast<uint8_t*>(dst);
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(out + (r - begin) * t.row_bytes(), t.data + r * t.stride(),
                  static_cast<size_t>(t.row_bytes()));
    }
    return;
  }
  INFLIGHT_CHECK_CODE(dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16,
                      ErrorCode::kUnsupported, "tensor '{}': cannot convert to {}", t.name,
                      dtype_name(dtype));
  INFLIGHT_CHECK_CODE(t.scale == nullptr || t.type == StoredType::kF8E4M3, ErrorCode::kUnsupported,
                      "tensor '{}': scaled {} weights cannot be converted yet", t.name,
                      stored_type_name(t.type));
  const int64_t cols = t.cols(), row_bytes = t.row_bytes(), stride = t.stride(), n = end - begin;
  const size_t out_size = dtype_size(dtype);
  auto* out = static_cast<uint8_t*>(dst);
  if (t.type == StoredType::kF8E4M3) {
    const ScaleGrid grid = scale_grid(t);
    ThreadPool::global().parallel_for(
        n,
        [&](int64_t b, int64_t e) {
          std::vector<float> row(dtype == DType::kF32 ? 0 : static_cast<size_t>(cols));
          for (int64_t r = b; r < e; ++r) {
            const int64_t src_row = t.source_row(begin + r);
            uint8_t* o = out + r * cols * static_cast<int64_t>(out_size);
            float* f = dtype == DType::kF32 ? reinterpret_cast<float*>(o) : row.data();
            dequantize_e4m3_row(t.data + src_row * stride, src_row, cols, grid, f);
            if (dtype == DType::kF32) continue;
            auto* o16 = reinterpret_cast<uint16_t*>(o);
            for (int64_t i = 0; i < cols; ++i) {
              o16[i] = dtype == DType::kBF16 ? f32_to_bf16(row[i]) : f32_to_f16(row[i]);
            }
          }
        },
        std::max<int64_t>(1, kChunkElements / std::max<int64_t>(cols, 1)));
    return;
  }
  if (t.is_plain(dtype)) {  // one contiguous copy
    const uint8_t* src = t.data + begin * row_bytes;
    const int64_t bytes = n * row_bytes;
    const int64_t chunk = kChunkElements * 16;
    ThreadPool::global().parallel_for(
        (bytes + chunk - 1) / chunk,
        [&](int64_t b, int64_t e) {
          const int64_t lo = b * chunk, hi = std::min(bytes, e * chunk);
          std::memcpy(out + lo, src + lo, static_cast<size_t>(hi - lo));
        },
        1);
    return;
  }
  const GgmlType type = as_ggml(t);
  const GgmlTypeTraits* traits = ggml_type_traits(static_cast<uint32_t>(type));
  INFLIGHT_CHECK_CODE(traits != nullptr && traits->can_dequantize && cols % traits->block_size == 0,
                      ErrorCode::kUnsupported,
                      "tensor '{}' has type {}, which cannot be dequantized (supported: f32, f16, "
                      "bf16, q4_0, q4_1, q8_0, q4_K, q6_K)",
                      t.name, ggml_type_name(static_cast<uint32_t>(type)));
  ThreadPool::global().parallel_for(
      n,
      [&](int64_t b, int64_t e) {
        std::vector<float> row(dtype == DType::kF32 ? 0 : static_cast<size_t>(cols));
        for (int64_t r = b; r < e; ++r) {
          const uint8_t* src = t.data + t.source_row(begin + r) * stride;
          uint8_t* o = out + r * cols * static_cast<int64_t>(out_size);
          if (dtype == DType::kF32) {
            dequantize_row(type, src, reinterpret_cast<float*>(o), cols);
            continue;
          }
          dequantize_row(type, src, row.data(), cols);
          auto* o16 = reinterpret_cast<uint16_t*>(o);
          for (int64_t i = 0; i < cols; ++i) {
            o16[i] = dtype == DType::kBF16 ? f32_to_bf16(row[i]) : f32_to_f16(row[i]);
          }
        }
      },
      std::max<int64_t>(1, kChunkElements / std::max<int64_t>(cols, 1)));
}

Tensor to_host_f32(const StoredTensor& t) {
  Tensor out = Tensor::empty(t.shape, DType::kF32);
  convert_rows(t, 0, t.rows(), DType::kF32, out.raw());
  return out;
}

void release_pages(const StoredTensor& t) {
  if (t.file == nullptr || t.data == nullptr) return;
  // Whole pages inside the tensor only: neighbours may still be needed.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto lo = (reinterpret_cast<uintptr_t>(t.data) + page - 1) / page * page;
  const auto hi =
      (reinterpret_cast<uintptr_t>(t.data) + static_cast<uintptr_t>(t.span_bytes())) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

}  // namespace inflight
