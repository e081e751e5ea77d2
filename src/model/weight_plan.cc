#include "model/weight_plan.h"

#include "core/check.h"

namespace inflight {

namespace {

double gib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}

}  // namespace

int64_t PlannedWeight::bytes() const {
  int64_t n = static_cast<int64_t>(dtype_size(dtype));
  for (const int64_t d : shape) n *= d;  // shapes of stored tensors: bounded by the files
  return n;
}

void check_weights_fit(const Backend& backend, int64_t bytes, std::string_view what) {
  const MemoryInfo m = backend.memory_info();
  INFLIGHT_CHECK_CODE(bytes <= m.free, ErrorCode::kOutOfMemory,
                      "{} need {:.2f} GiB ({} bytes) on {}, but only {:.2f} GiB of its {:.2f} GiB "
                      "are free",
                      what, gib(bytes), bytes, backend.name(), gib(m.free), gib(m.total));
}

Tensor load_planned(Backend& backend, const PlannedWeight& w) {
  Tensor t = backend.alloc(w.shape, w.dtype);
  int64_t row = 0;
  for (const StoredTensor& part : w.parts) {
    backend.load_weight(part, t.rows(row, row + part.shape[0]));
    release_pages(part);
    row += part.shape[0];
  }
  return t;
}

}  // namespace inflight
