#include "eval/text_windows.h"

#include <algorithm>

#include "core/check.h"

namespace inflight::eval {

std::vector<std::vector<int32_t>> split_windows(std::span<const int32_t> tokens, int32_t context,
                                                int32_t max_windows, int32_t bos) {
  INFLIGHT_CHECK_CODE(context >= 2, ErrorCode::kInvalidArgument,
                      "--context {}: a window needs at least 2 tokens", context);
  INFLIGHT_CHECK_CODE(max_windows >= 0, ErrorCode::kInvalidArgument,
                      "--max-windows {}: must be 0 (all) or positive", max_windows);
  const auto text_per_window = static_cast<size_t>(bos >= 0 ? context - 1 : context);
  const size_t available = tokens.size() / text_per_window;
  INFLIGHT_CHECK_CODE(available > 0, ErrorCode::kInvalidArgument,
                      "the text has {} tokens, fewer than one window of {} (--context {}): use a "
                      "smaller --context or a longer text",
                      tokens.size(), text_per_window, context);
  const size_t count =
      max_windows > 0 ? std::min(available, static_cast<size_t>(max_windows)) : available;
  std::vector<std::vector<int32_t>> windows(count);
  for (size_t w = 0; w < count; ++w) {
    std::vector<int32_t>& out = windows[w];
    out.reserve(static_cast<size_t>(context));
    if (bos >= 0) out.push_back(bos);
    const auto begin = tokens.begin() + static_cast<std::ptrdiff_t>(w * text_per_window);
    out.insert(out.end(), begin, begin + static_cast<std::ptrdiff_t>(text_per_window));
  }
  return windows;
}

}  // namespace inflight::eval
