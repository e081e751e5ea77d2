// libFuzzer target: SafetensorsFile::parse over arbitrary bytes, then each small tensor read
// as stored and converted to f32.
// Any input may be rejected with inflight::Error; nothing may crash or overread.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> copy(data, data + size);  // exactly sized: overreads are caught
  try {
    auto f = inflight::SafetensorsFile::parse(copy.data(), copy.size(), "fuzz.safetensors");
    for (const auto& t : f->tensors()) {
      if (t.data < copy.data() || t.data + t.nbytes > copy.data() + copy.size()) std::abort();
      if (f->find(t.name) != &t) std::abort();
      try {
        if (t.nbytes <= 1 << 16) to_host_f32(f->load_raw(t, nullptr));
      } catch (const inflight::Error&) {
      }
    }
  } catch (const inflight::Error&) {
  }
  return 0;
}
