#include "frontend/frontend.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "frontend/api_error.h"

namespace inflight::frontend {

Frontend::Frontend(FrontendOptions options) : options_(std::move(options)) {
  created_ = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  // Stable for one build and model name, as OpenAI's identifies a backend configuration.
  size_t h = std::hash<std::string>{}("inflight-0.1.0/" + options_.served_model_name);
  fingerprint_ = fmt::format("fp_{:010x}", h & 0xffffffffffULL);
}

void Frontend::load(std::shared_ptr<const LoadedModel> model) {
  model_.store(std::move(model));
}

const LoadedModel& Frontend::model() const {
  // NOTE: the LoadedModel is never unpublished, so the reference outlives this shared_ptr.
  auto m = model_.load();
  if (!m) throw ApiError(503, "the model is still loading");
  return *m;
}

bool is_tgi_placeholder(std::string_view name) {
  return name == "tgi" || name == "dummy";
}

void Frontend::check_model(const std::string& requested) const {
  if (!requested.empty() && !serves(requested) && !is_tgi_placeholder(requested)) {
    throw ApiError(404, fmt::format("The model `{}` does not exist.", requested), "model");
  }
}

bool Frontend::serves(std::string_view name) const {
  return name == options_.served_model_name ||
         std::find(options_.aliases.begin(), options_.aliases.end(), name) !=
             options_.aliases.end();
}

bool Frontend::try_acquire_slot() {
  int64_t n = in_flight_.fetch_add(1) + 1;
  if (n > options_.max_concurrent_requests) {
    in_flight_.fetch_sub(1);
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  last_request_ms_.store(std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count(),
                         std::memory_order_relaxed);
  return true;
}

void Frontend::release_slot() {
  in_flight_.fetch_sub(1);
}

}  // namespace inflight::frontend
