#include "py_engine.h"

#include <atomic>
#include <condition_variable>
#include <iterator>

#include "core/check.h"
#include "errors.h"
#include "frontend/prompt_builder.h"

namespace inflight::python {

PyEngine::PyEngine(const ModelSource& source, const EngineConfig& config,
                   const std::string& chat_template) {
  auto engine = Engine::load(source, config);
  if (engine.status().code() == StatusCode::kNotFound) {
    // A missing model file: FileNotFoundError in Python (a missing request is KeyError).
    throw Error(ErrorCode::kNotFound, "cannot start the engine: " + engine.status().message());
  }
  throw_if_error(engine.status(), "cannot start the engine");
  model_ = frontend::make_loaded_model(std::move(engine).value(), chat_template);
}

PyEngine::~PyEngine() {
  shutdown(ShutdownMode::kAbort);
}

const Tokenizer& PyEngine::tokenizer() const {
  if (!model_->tokenizer) {
    throw StatusError(Status(StatusCode::kUnsupported,
                             "the model has no tokenizer (dummy weights): give prompts as token "
                             "ids, or pass tokenizer=PATH"));
  }
  return *model_->tokenizer;
}

Request PyEngine::make_request(const frontend::PromptInput& prompt, bool add_special_tokens,
                               const SamplingParams& sampling) const {
  if (!prompt.is_tokens()) tokenizer();
  return frontend::build_engine_request(*model_, prompt, add_special_tokens, sampling);
}

std::vector<Completion> PyEngine::run_batch(std::vector<Request> requests,
                                            const std::function<void(size_t)>& poll) {
  struct Wake {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<size_t> ready;  // indices into `requests` with outputs queued
  };
  auto wake = std::make_shared<Wake>();
  const size_t count = requests.size();
  std::vector<Completion> done(count);
  std::vector<std::shared_ptr<OutputStream>> streams(count);
  std::vector<int32_t> num_choices(count);
  std::vector<RequestOutput> outs;
  size_t num_finished = 0;
  try {
    for (size_t i = 0; i < count; ++i) {
      Request& r = requests[i];
      num_choices[i] = r.sampling.n;
      done[i].prompt_token_ids = r.prompt_token_ids;
      done[i].result = frontend::make_result(1, r.sampling.n);
      r.notify = [wake, i] {
        std::lock_guard<std::mutex> lock(wake->mutex);
        wake->ready.push_back(i);
        wake->cv.notify_one();
      };
      auto handle = engine().enqueue(std::move(r));
      throw_if_error(handle.status(), "request " + std::to_string(i));
      done[i].id = handle->id;
      streams[i] = handle->stream;
    }
    std::vector<size_t> ready;
    while (num_finished < count) {
      {
        std::unique_lock<std::mutex> lock(wake->mutex);
        wake->cv.wait_for(lock, kPollInterval, [&] { return !wake->ready.empty(); });
        ready.swap(wake->ready);
      }
      for (size_t i : ready) {
        if (!streams[i]) continue;
        outs.clear();
        streams[i]->try_pop(outs);
        for (RequestOutput& o : outs) {
          frontend::TaggedOutput tagged{0, std::move(o)};
          frontend::add_output(done[i].result, num_choices[i], tagged);
        }
        if (streams[i]->done()) {
          streams[i].reset();
          ++num_finished;
        }
      }
      ready.clear();
      poll(num_finished);
    }
  } catch (...) {
    for (const auto& s : streams) {
      if (s) engine().cancel(s->id());
    }
    throw;
  }
  return done;
}

RequestId PyEngine::submit(Request request) {
  // NOTE: the id is known only once enqueue returns, but the first notify may come before: then
  // the callback pushes kAnyRequest and drain looks at every stream (it waits on streams_mutex_,
  // held here until the stream is registered).
  auto id_cell = std::make_shared<std::atomic<RequestId>>(kAnyRequest);
  request.notify = [this, id_cell] {
    const RequestId id = id_cell->load(std::memory_order_acquire);
    ready_.push(id);
  };
  std::lock_guard<std::mutex> lock(streams_mutex_);
  auto handle = engine().enqueue(std::move(request));
  throw_if_error(handle.status());
  id_cell->store(handle->id, std::memory_order_release);
  streams_.emplace(handle->id, handle->stream);
  return handle->id;
}

std::vector<RequestOutput> PyEngine::drain() {
  std::vector<RequestOutput> outs;
  const std::vector<RequestId> ids = ready_.take();
  std::lock_guard<std::mutex> lock(streams_mutex_);
  for (RequestId id : ids) {
    if (id == kAnyRequest) {
      for (auto it = streams_.begin(); it != streams_.end();) {
        it->second->try_pop(outs);
        it = it->second->done() ? streams_.erase(it) : std::next(it);
      }
      continue;
    }
    auto it = streams_.find(id);
    if (it == streams_.end()) continue;
    it->second->try_pop(outs);
    if (it->second->done()) streams_.erase(it);
  }
  return outs;
}

bool PyEngine::cancel(RequestId id) {
  return engine().cancel(id).ok();
}

void PyEngine::shutdown(ShutdownMode mode) {
  model_->engine->shutdown(mode);
}

}  // namespace inflight::python
