#include "frontend/frontend.h"

#include <fmt/format.h>

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

void Frontend::check_model(const std::string& requested) const {
  // "tgi" and "dummy": the names TGI clients send for the one model a TGI server has
  // (huggingface_hub's InferenceClient given a base URL); any other name must be the served one.
  const bool tgi_placeholder = requested == "tgi" || requested == "dummy";
  if (!requested.empty() && requested != options_.served_model_name && !tgi_placeholder) {
    throw ApiError(404, fmt::format("The model `{}` does not exist.", requested), "model");
  }
}

bool Frontend::try_acquire_slot() {
  int64_t n = in_flight_.fetch_add(1) + 1;
  if (n > options_.max_concurrent_requests) {
    in_flight_.fetch_sub(1);
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void Frontend::release_slot() {
  in_flight_.fetch_sub(1);
}

}  // namespace inflight::frontend
