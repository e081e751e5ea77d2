#include "frontend/model_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/check.h"
#include "core/logging.h"
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

const ModelRegistry::Entry* ModelRegistry::clash_locked(const std::vector<std::string>& names,
                                                        const Entry* self) const {
  for (const auto& n : names) {
    const Entry* other = find_locked(n);
    if (other != nullptr && other != self) return other;
  }
  return nullptr;
}

void ModelRegistry::add(const std::string& name, std::vector<std::string> aliases) {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names = aliases;
  names.push_back(name);
  for (const auto& n : names) {
    const Entry* other = clash_locked({n}, nullptr);
    INFLIGHT_CHECK_CODE(other == nullptr, ErrorCode::kInvalidArgument,
                        "model '{}': the name '{}' is taken by model '{}'; give it another "
                        "served_model_name or alias",
                        name, n, other ? other->name : "");
  }
  Entry& e = entries_.emplace_back();
  e.name = name;
  e.aliases = std::move(aliases);
}

void ModelRegistry::refresh() {
  if (!source_.models) return;
  std::vector<Names> found;
  try {
    found = source_.models();  // reads the source: outside the lock
  } catch (const Error& e) {
    INFLIGHT_LOG_WARN("the model repository cannot be read: {}", e.message());
    return;  // the models stay as they were
  }
  std::lock_guard lock(mutex_);
  // UNAVAILABLE models the source no longer holds leave; the others stay until unloaded.
  std::erase_if(entries_, [&](const Entry& e) {
    return e.state == ModelState::kUnavailable &&
           std::none_of(found.begin(), found.end(),
                        [&](const Names& n) { return n.name == e.name; });
  });
  for (const Names& n : found) {
    std::vector<std::string> names = n.aliases;
    names.push_back(n.name);
    Entry* e = find_locked(n.name);
    if (e != nullptr && e->name != n.name) e = nullptr;  // an alias of another model
    if (const Entry* other = clash_locked(names, e)) {
      if (clashes_.insert(n.name).second) {  // once per name, not at every look
        INFLIGHT_LOG_WARN(
            "model '{}' of the repository is not served: it takes a name of model "
            "'{}'",
            n.name, other->name);
      }
      continue;
    }
    if (e == nullptr) {
      Entry& added = entries_.emplace_back();
      added.name = n.name;
      added.aliases = n.aliases;
    } else if (e->state == ModelState::kUnavailable) {
      e->aliases = n.aliases;  // a loaded model takes new aliases when it is loaded again
    }
  }
}

Status ModelRegistry::load(const std::string& name) {
  refresh();
  const auto not_found = [&] {
    return Status(StatusCode::kNotFound,
                  fmt::format("no model '{}' in the model repository", name));
  };
  std::string served;
  {
    std::lock_guard lock(mutex_);
    const Entry* e = find_locked(name);
    if (e == nullptr) return not_found();
    served = e->name;
  }
  // Reads the model's files: outside the lock every request's resolve() takes.
  const bool files_changed = source_.changed && source_.changed(served);
  std::shared_ptr<Frontend> fe;
  bool reload = false;
  {
    std::lock_guard lock(mutex_);
    Entry* e = find_locked(served);
    if (e == nullptr) return not_found();
    if (e->state == ModelState::kReady && !e->reloading) {
      if (!files_changed) return Status();  // loaded as it is
      reload = true;
    }
    if (e->state != ModelState::kUnavailable && !reload) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("model '{}' is {}: wait until it is done", e->name,
                                e->reloading ? "RELOADING" : model_state_name(e->state)));
    }
    FrontendOptions options = shared_;
    options.served_model_name = e->name;
    options.aliases = e->aliases;
    fe = std::make_shared<Frontend>(std::move(options));
    if (reload) {
      e->reloading = true;  // the loaded engine serves until the new one is up
    } else {
      e->state = ModelState::kLoading;
      e->reason.clear();
      e->frontend = fe;  // requests now get 503 "still loading"
    }
  }
  std::string error;
  try {
    fe->load(loader_(served));
  } catch (const Error& err) {
    // What the operator can act on; the source location only for a bug of ours.
    error = err.code() == ErrorCode::kInternal ? err.what() : err.message();
  } catch (const std::exception& err) {
    error = err.what();
  }
  std::lock_guard lock(mutex_);
  Entry* e = find_locked(served);
  INFLIGHT_CHECK(e != nullptr, "model '{}' left the registry while loading", served);
  if (reload) {
    e->reloading = false;
    if (!error.empty()) {
      return Status(
          StatusCode::kInvalidArgument,
          fmt::format("failed to reload '{}' (the loaded one serves on): {}", e->name, error));
    }
    std::shared_ptr<Frontend> old = std::exchange(e->frontend, fe);
    threads_.emplace_back([old = std::move(old)] { drain(old); });
    return Status();
  }
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
  if (e->state == ModelState::kLoading || e->reloading) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("model '{}' is {}: unload it once it is READY", e->name,
                              e->reloading ? "RELOADING" : "LOADING"));
  }
  e->state = ModelState::kUnloading;
  threads_.emplace_back(&ModelRegistry::drain_and_drop, this, e->name, e->frontend);
  return Status();
}

void ModelRegistry::drain(const std::shared_ptr<Frontend>& frontend) {
  // The slots count every client request on the model, so none is cut short. A request that
  // resolved the model just before and submits after the engine stops gets 503.
  while (frontend->in_flight() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (auto model = frontend->model_or_null()) model->engine->shutdown(ShutdownMode::kDrain);
}

void ModelRegistry::drain_and_drop(std::string name, std::shared_ptr<Frontend> frontend) {
  drain(frontend);
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

std::vector<ModelStatus> ModelRegistry::index() {
  refresh();
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
