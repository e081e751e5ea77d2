// ModelRegistry: the models one server serves, found by name or alias, each a Frontend of its
// own (its engine, slots and counters), with Triton's repository states. The transports resolve
// a request's model here; the registry knows nothing of HTTP or gRPC and nothing of how a model
// is built (the Loader does that).
//
//   UNAVAILABLE --load--> LOADING --ok--> READY --unload--> UNLOADING --drained--> UNAVAILABLE
//                                   \--error--> UNAVAILABLE, the error kept as its reason
//
// Unload stops routing to the model at once (new requests: 404), lets the requests in flight
// finish, then shuts its engine down and drops it, on a thread of the registry's: the caller
// does not wait. Other models are never touched: their streams go on.
//
// With a Source (a model repository) the registry follows it: the index and a load look again,
// so a model directory added after start can be listed and loaded, and an UNAVAILABLE model
// whose directory is gone leaves the index. Load of a READY model whose files changed since it
// was loaded reloads it (Triton's): a new engine is built from the files as they are now while
// the loaded one serves on; once it is up, new requests go to it and the old one drains as an
// unload does. A reload that fails leaves the loaded engine serving; a reload keeps the model's
// names. Load of a READY model that did not change (or without a Source) changes nothing.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "frontend/frontend.h"
#include "inflight/status.h"

namespace inflight::frontend {

enum class ModelState { kUnavailable, kLoading, kReady, kUnloading };
// "UNAVAILABLE", "LOADING", "READY", "UNLOADING" (Triton's names).
const char* model_state_name(ModelState state);

// One model of the index.
struct ModelStatus {
  std::string name;
  ModelState state = ModelState::kUnavailable;
  std::string reason;  // why it is unavailable: its load error, or "unloaded"
};

class ModelRegistry {
 public:
  // Builds the model named `name` (a served name given to add); throws with a message the
  // operator can act on when it cannot.
  using Loader = std::function<std::shared_ptr<const LoadedModel>(const std::string& name)>;
  // The models the source holds now, by served name with their aliases.
  struct Names {
    std::string name;
    std::vector<std::string> aliases;
  };
  // Where the models come from, when it can change while the server runs (a repository).
  struct Source {
    std::function<std::vector<Names>()> models;  // the models it holds now
    // Whether the files of a loaded model changed since its last load.
    std::function<bool(const std::string& name)> changed;
  };

  // `shared`: the options every model's Frontend starts from (its names replace the name).
  ModelRegistry(FrontendOptions shared, Loader loader);
  // Shuts down every engine (abort) and joins the registry's threads.
  ~ModelRegistry();
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  // Registers a model, UNAVAILABLE; kInvalidArgument (inflight::Error) naming both models when
  // its name or an alias is another model's.
  void add(const std::string& name, std::vector<std::string> aliases);
  // Set before serving: models the source gains are added, UNAVAILABLE ones it lost removed
  // (a name that clashes with a model's is skipped with a warning).
  void set_source(Source source) { source_ = std::move(source); }

  // Loads `name` (blocking), or reloads it when READY and changed: kNotFound for a name never
  // added, kInvalidArgument when it is busy (loading, reloading, unloading), else the loader's
  // error (a model being loaded is then UNAVAILABLE with it as reason; one being reloaded
  // serves on).
  Status load(const std::string& name);
  // The same on a thread of the registry's; `done` is called there.
  void load_async(const std::string& name, std::function<void(Status)> done);
  // Starts unloading a READY model (see above); kNotFound / kInvalidArgument as load.
  Status unload(const std::string& name);

  // The model a request names (a served name or an alias). Empty or a TGI placeholder: the one
  // model served. ApiError 404 for a name not served (or not loaded), 400 when the request
  // names none and several are served.
  std::shared_ptr<Frontend> resolve(std::string_view requested) const;

  // Models added (loaded or not).
  size_t size() const;
  // `name` is a model's served name or alias, loaded or not.
  bool knows(std::string_view name) const;
  // Every model added, in the order added (after a look at the source, when it has one).
  std::vector<ModelStatus> index();
  // The Frontends of the models loading, ready or unloading, in the order added.
  std::vector<std::shared_ptr<Frontend>> frontends() const;
  // The server is ready once its start-up loads are done (set by whoever runs them).
  void set_started() { started_ = true; }
  bool ready() const { return started_; }

 private:
  struct Entry {
    std::string name;
    std::vector<std::string> aliases;
    ModelState state = ModelState::kUnavailable;
    std::string reason;
    std::shared_ptr<Frontend> frontend;  // set while LOADING, READY or UNLOADING
    bool reloading = false;              // READY, a new engine being built beside it
  };
  Entry* find_locked(std::string_view name);
  const Entry* find_locked(std::string_view name) const;
  // A name of `names` that is another model's than `self`'s (nullptr: none).
  const Entry* clash_locked(const std::vector<std::string>& names, const Entry* self) const;
  // Follows the Source (no-op without one).
  void refresh();
  // Waits until no request holds `frontend`, then shuts its engine down.
  static void drain(const std::shared_ptr<Frontend>& frontend);
  void drain_and_drop(std::string name, std::shared_ptr<Frontend> frontend);

  const FrontendOptions shared_;
  const Loader loader_;
  Source source_;
  std::set<std::string> clashes_;  // models of the source not served for a taken name (warned)
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  std::vector<std::thread> threads_;  // loads and unloads started here; joined on destruction
  std::atomic<bool> started_{false};
};

}  // namespace inflight::frontend
