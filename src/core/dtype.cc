#include "core/dtype.h"

namespace inflight {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kF8E4M3: return "f8_e4m3";
  }
  return "?";
}

}  // namespace inflight
