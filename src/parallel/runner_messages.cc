#include "parallel/runner_messages.h"

#include <cstring>
#include <type_traits>

#include "core/check.h"

namespace inflight {
namespace {

class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  template <typename T>
  void put(const std::vector<T>& v) {
    put(static_cast<uint64_t>(v.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    bytes_.insert(bytes_.end(), p, p + v.size() * sizeof(T));
  }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  template <typename T>
  void get(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    take(&v, sizeof(T));
  }
  template <typename T>
  void get(std::vector<T>& v) {
    uint64_t n = 0;
    get(n);
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

}  // namespace

std::vector<uint8_t> encode(const RunnerMessage& m) {
  Writer w;
  w.put(m.command);
  w.put(m.a);
  w.put(m.b);
  if (m.command == RunnerCommand::kStep) {
    const ForwardBatch& b = m.batch;
    w.put(b.token_ids);
    w.put(b.positions);
    w.put(b.slot_mapping);
    w.put(b.query_start);
    w.put(b.context_lens);
    w.put(b.block_tables);
    w.put(b.max_blocks_per_seq);
    w.put(b.logits_indices);
    w.put(m.request.top_k);
    w.put(m.request.full_rows);
  }
  return w.take();
}

RunnerMessage decode(const std::vector<uint8_t>& bytes) {
  Reader r(bytes);
  RunnerMessage m;
  r.get(m.command);
  r.get(m.a);
  r.get(m.b);
  if (m.command == RunnerCommand::kStep) {
    ForwardBatch& b = m.batch;
    r.get(b.token_ids);
    r.get(b.positions);
    r.get(b.slot_mapping);
    r.get(b.query_start);
    r.get(b.context_lens);
    r.get(b.block_tables);
    r.get(b.max_blocks_per_seq);
    r.get(b.logits_indices);
    r.get(m.request.top_k);
    r.get(m.request.full_rows);
  }
  INFLIGHT_CHECK(r.done(), "runner message: {} trailing bytes", bytes.size());
  return m;
}

}  // namespace inflight
