#include "parallel/runner_messages.h"

#include <cstring>
#include <type_traits>

#include "core/check.h"

namespace inflight {
namespace {

// Bytes out: field(v) appends v (a vector: its length, then its elements).
class Writer {
 public:
  template <typename T>
  void field(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  template <typename T>
  void field(const std::vector<T>& v) {
    field(static_cast<uint64_t>(v.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    bytes_.insert(bytes_.end(), p, p + v.size() * sizeof(T));
  }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

// Bytes in: field(v) reads what Writer::field wrote.
class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  template <typename T>
  void field(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    take(&v, sizeof(T));
  }
  template <typename T>
  void field(std::vector<T>& v) {
    uint64_t n = 0;
    field(n);
    INFLIGHT_CHECK(n <= (bytes_.size() - at_) / sizeof(T), "runner message: truncated array");
    v.resize(n);
    take(v.data(), n * sizeof(T));
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  void take(void* dst, size_t n) {
    INFLIGHT_CHECK(n <= bytes_.size() - at_, "runner message: truncated");
    std::memcpy(dst, bytes_.data() + at_, n);
    at_ += n;
  }
  const std::vector<uint8_t>& bytes_;
  size_t at_ = 0;
};

// The fields of a step, in order: the one list both directions follow (Batch and Request are
// const for the Writer).
template <typename Io, typename Batch, typename Request>
void step_fields(Io& io, Batch& b, Request& request) {
  io.field(b.token_ids);
  io.field(b.positions);
  io.field(b.slot_mapping);
  io.field(b.query_start);
  io.field(b.context_lens);
  io.field(b.block_tables);
  io.field(b.max_blocks_per_seq);
  io.field(b.logits_indices);
  io.field(request.top_k);
  io.field(request.full_rows);
  io.field(request.sampled_vocab);
}

}  // namespace

std::vector<uint8_t> encode(RunnerCommand command, int64_t a, int64_t b) {
  INFLIGHT_CHECK(command != RunnerCommand::kStep, "a step is encoded by encode_step");
  Writer w;
  w.field(command);
  w.field(a);
  w.field(b);
  return w.take();
}

std::vector<uint8_t> encode_step(const ForwardBatch& batch, const LogitsRequest& request) {
  Writer w;
  w.field(RunnerCommand::kStep);
  w.field(int64_t{0});
  w.field(int64_t{0});
  step_fields(w, batch, request);
  return w.take();
}

RunnerMessage decode(const std::vector<uint8_t>& bytes) {
  Reader r(bytes);
  RunnerMessage m;
  r.field(m.command);
  r.field(m.a);
  r.field(m.b);
  if (m.command == RunnerCommand::kStep) step_fields(r, m.batch, m.request);
  INFLIGHT_CHECK(r.done(), "runner message: {} trailing bytes", bytes.size());
  return m;
}

}  // namespace inflight
