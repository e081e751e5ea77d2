// libFuzzer target: GgufFile::parse over arbitrary bytes, then every getter on whatever parsed.
// Any input may be rejected with inflight::Error; nothing may crash, overread or hang.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "formats/ggml_types.h"
#include "formats/gguf.h"

namespace {

using inflight::GgufFile;
using inflight::GgufValueType;

void touch_value(const GgufFile& f, const std::string& key) {
  switch (f.type_of(key)) {
    case GgufValueType::kString:
      f.get_string(key);
      break;
    case GgufValueType::kF32:
    case GgufValueType::kF64:
      f.get_float(key);
      break;
    case GgufValueType::kBool:
      f.get_bool(key);
      break;
    case GgufValueType::kArray:
      f.array_size(key);
      switch (f.array_type_of(key)) {
        case GgufValueType::kString:
          f.get_string_array(key);
          break;
        case GgufValueType::kF32:
        case GgufValueType::kF64:
          f.get_float_array(key);
          break;
        default:
          f.get_int_array(key);
          break;
      }
      break;
    default:
      f.get_int(key);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exactly sized copy, so that AddressSanitizer flags any read past the end.
  std::vector<uint8_t> copy(data, data + size);
  try {
    auto f = GgufFile::parse(copy.data(), copy.size(), "fuzz.gguf");
    for (const auto& key : f->keys()) {
      try {
        touch_value(*f, key);
      } catch (const inflight::Error&) {
      }
    }
    for (const auto& t : f->tensors()) {
      if (t.data < copy.data() || t.data + t.nbytes > copy.data() + copy.size()) std::abort();
      if (f->find_tensor(t.name) != &t) std::abort();
      // Dequantise small tensors of the supported types.
      const auto* traits = inflight::ggml_type_traits(t.type);
      int64_t numel = 1;
      for (int64_t d : t.shape) numel *= d;
      if (traits && traits->can_dequantize && numel <= 4096) {
        std::vector<float> out(static_cast<size_t>(numel));
        inflight::dequantize_row(static_cast<inflight::GgmlType>(t.type), t.data, out.data(),
                                 numel);
      }
    }
  } catch (const inflight::Error&) {
  }
  return 0;
}
