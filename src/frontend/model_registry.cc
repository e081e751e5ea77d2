#include "frontend/model_registry.h"

#include <fmt/format.h>

#include <chrono>

#include "core/check.h"
#include "frontend/api_error.h"

namespace inflight::frontend {

const char* model_state_name(ModelState state) {
  switch (state) {
    case ModelState::kUnavailable:
      return "UNAVAILABLE";
    case ModelState::kLoading:
      return "LOADING";
    case ModelState::kReady:
      return "READY";
    case ModelState::kUnloading:
      return "UNLOADING";
  }
  return "UNAVAILABLE";
}

ModelRegistry::ModelRegistry(FrontendOptions shared, Loader loader)
    : shared_(std::move(shared)), loader_(std::move(loader)) {}

ModelRegistry::~ModelRegistry() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
  for (const auto& fe : frontends()) {
    if (auto model = fe->model_or_null()) model->engine->shutdown(ShutdownMode::kAbort);
  }
}

ModelRegistry::Entry* ModelRegistry::find_locked(std::string_view name) {
  for (Entry& e : entries_) {
    if (e.name == name) return &e;
    for (const auto& a : e.aliases) {
      if (a == name) return &e;
    }
  }
  return nullptr;
}

const ModelRegistry::Entry* ModelRegistry::find_locked(std::string_view name) const {
  return const_cast<ModelRegistry*>(this)->find_locked(name);
}

void ModelRegistry::add(const std::string& name, std::vector<std::string> aliases) {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names = aliases;
  names.push_back(name);
  for (const auto& n : names) {
    const Entry* other = find_locked(n);
    INFLIGHT_CHECK_CODE(other == nullptr, ErrorCode::kInvalidArgument,
                        "model '{}': the name '{}' is taken by model '{}'; give it another "
                        "served_model_name or alias",
                        name, n, other ? other->name : "");
  }
  Entry& e = entries_.emplace_back();
  e.name = name;
  e.aliases = std::move(aliases);
}

Status ModelRegistry::load(const std::string& name) {
  std::shared_ptr<Frontend> fe;
  {
    std::lock_guard lock(mutex_);
    Entry* e = find_locked(name);
    if (e == nullptr) {
      return Status(StatusCode::kNotFound,
                    fmt::format("no model '{}' in the model repository", name));
    }
    if (e->state == ModelState::kReady) return Status();  // loaded already
    if (e->state != ModelState::kUnavailable) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("model '{}' is {}: wait until it is done", e->name,
                                model_state_name(e->state)));
    }
    FrontendOptions options = shared_;
    options.served_model_name = e->name;
    options.aliases = e->aliases;
    fe = std::make_shared<Frontend>(std::move(options));
    e->state = ModelState::kLoading;
    e->reason.clear();
    e->frontend = fe;  // requests now get 503 "still loading"
  }
  std::string error;
  try {
    fe->load(loader_(fe->options().served_model_name));
  } catch (const Error& err) {
    // What the operator can act on; the source location only for a bug of ours.
    error = err.code() == ErrorCode::kInternal ? err.what() : err.message();
  } catch (const std::exception& err) {
    error = err.what();
  }
  std::lock_guard lock(mutex_);
  Entry* e = find_locked(fe->options().served_model_name);
  if (!error.empty()) {
    e->state = ModelState::kUnavailable;
    e->reason = error;
    e->frontend.reset();
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("failed to load '{}': {}", e->name, error));
  }
  e->state = ModelState::kReady;
  return Status();
}

void ModelRegistry::load_async(const std::string& name, std::function<void(Status)> done) {
  std::lock_guard lock(mutex_);
  threads_.emplace_back([this, name, done = std::move(done)] { done(load(name)); });
}

Status ModelRegistry::unload(const std::string& name) {
  std::lock_guard lock(mutex_);
  Entry* e = find_locked(name);
  if (e == nullptr) {
    return Status(StatusCode::kNotFound,
                  fmt::format("no model '{}' in the model repository", name));
  }
  if (e->state == ModelState::kUnavailable || e->state == ModelState::kUnloading) {
    return Status();  // unloaded, or on its way
  }
  if (e->state == ModelState::kLoading) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("model '{}' is LOADING: unload it once it is READY", e->name));
  }
  e->state = ModelState::kUnloading;
  threads_.emplace_back(&ModelRegistry::drain_and_drop, this, e->name, e->frontend);
  return Status();
}

void ModelRegistry::drain_and_drop(std::string name, std::shared_ptr<Frontend> frontend) {
  // The slots count every client request on the model, so none is cut short. A request that
  // resolved the model just before and submits after the engine stops gets 503.
  while (frontend->in_flight() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (auto model = frontend->model_or_null()) model->engine->shutdown(ShutdownMode::kDrain);
  std::lock_guard lock(mutex_);
  Entry* e = find_locked(name);
  e->state = ModelState::kUnavailable;
  e->reason = "unloaded";
  e->frontend.reset();  // the engine goes with the last request holding the Frontend
}

std::shared_ptr<Frontend> ModelRegistry::resolve(std::string_view requested) const {
  std::lock_guard lock(mutex_);
  if (requested.empty() || is_tgi_placeholder(requested)) {
    std::vector<const Entry*> serving;
    for (const Entry& e : entries_) {
      if (e.state == ModelState::kLoading || e.state == ModelState::kReady) serving.push_back(&e);
    }
    if (serving.size() == 1) return serving[0]->frontend;
    if (serving.empty()) throw ApiError(503, "no model is loaded");
    std::vector<std::string> names;
    for (const Entry* e : serving) names.push_back(e->name);
    throw_bad_request(fmt::format("{} models are served ({}): name one in `model`", serving.size(),
                                  fmt::join(names, ", ")),
                      "model");
  }
  const Entry* e = find_locked(requested);
  if (e == nullptr) {
    throw ApiError(404, fmt::format("The model `{}` does not exist.", requested), "model");
  }
  if (e->state != ModelState::kLoading && e->state != ModelState::kReady) {
    throw ApiError(
        404,
        fmt::format("The model `{}` is not loaded ({}{}{}).", requested, model_state_name(e->state),
                    e->reason.empty() ? "" : ": ", e->reason),
        "model");
  }
  return e->frontend;
}

size_t ModelRegistry::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

bool ModelRegistry::knows(std::string_view name) const {
  std::lock_guard lock(mutex_);
  return find_locked(name) != nullptr;
}

std::vector<ModelStatus> ModelRegistry::index() const {
  std::lock_guard lock(mutex_);
  std::vector<ModelStatus> out;
  for (const Entry& e : entries_) out.push_back({e.name, e.state, e.reason});
  return out;
}

std::vector<std::shared_ptr<Frontend>> ModelRegistry::frontends() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<Frontend>> out;
  for (const Entry& e : entries_) {
    if (e.frontend) out.push_back(e.frontend);
  }
  return out;
}

}  // namespace inflight::frontend
