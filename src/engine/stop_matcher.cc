#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace inflight {

StopMatcher::StopMatcher(std::vector<std::string> stops, bool include_stop_in_output)
    : stops_(std::move(stops)), include_stop_(include_stop_in_output) {
  for (const auto& s : stops_) INFLIGHT_CHECK(!s.empty(), "empty stop string");
}

StopMatcher::Update StopMatcher::append(std::string_view delta) {
  Update up;
  if (done_) return up;
  pending_.append(delta);
  // NOTE: only pending_ is searched. Shown text never holds the start of a match that is still
  // incomplete (it would have been held back), so no match can begin before pending_.
  size_t best_pos = std::string::npos;
  size_t best = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = pending_.find(stops_[i]);
    // Earliest match wins; at the same position the longer stop string.
    if (pos < best_pos ||
        (pos == best_pos && pos != std::string::npos && stops_[i].size() > stops_[best].size())) {
      best_pos = pos;
      best = i;
    }
  }
  if (best_pos != std::string::npos) {
    done_ = true;
    up.matched_stop = best;
    up.text = pending_.substr(0, include_stop_ ? best_pos + stops_[best].size() : best_pos);
    pending_.clear();
    return up;
  }
  // Hold back the longest suffix of pending_ that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) ==
          std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  up.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return up;
}

std::string StopMatcher::flush() {
  if (done_) return {};
  return std::exchange(pending_, std::string());
}

}  // namespace inflight
