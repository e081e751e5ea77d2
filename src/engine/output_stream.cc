#include "inflight/output_stream.h"

#include "engine/stream_state.h"

namespace inflight {

namespace detail {

void StreamState::push(std::vector<RequestOutput>& outputs) {
  if (outputs.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& o : outputs) {
      if (o.request_finished) finished = true;
      queue.push_back(std::move(o));
    }
  }
  outputs.clear();
  cv.notify_all();
  if (!notify) return;
  try {
    notify();
  } catch (...) {
    // NOTE: a client's callback must not take the engine loop down with it; the outputs are
    // queued regardless and wait_pop()/try_pop() still see them.
  }
}

}  // namespace detail

OutputStream::OutputStream(std::shared_ptr<detail::StreamState> state) : state_(std::move(state)) {}
OutputStream::~OutputStream() = default;

RequestId OutputStream::id() const {
  return state_->id;
}

size_t OutputStream::try_pop(std::vector<RequestOutput>& out) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const size_t n = state_->queue.size();
  for (auto& o : state_->queue) out.push_back(std::move(o));
  state_->queue.clear();
  return n;
}

size_t OutputStream::wait_pop(std::vector<RequestOutput>& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->cv.wait_for(lock, timeout, [&] { return !state_->queue.empty() || state_->finished; });
  const size_t n = state_->queue.size();
  for (auto& o : state_->queue) out.push_back(std::move(o));
  state_->queue.clear();
  return n;
}

bool OutputStream::finished() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->finished;
}

bool OutputStream::done() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->finished && state_->queue.empty();
}

}  // namespace inflight
