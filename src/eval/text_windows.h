// Windows of a tokenized text for next-token evaluation: consecutive, non-overlapping spans of
// the text, each run as one prefill of `context` tokens in which every position but the last
// predicts the token after it (context - 1 scored positions per window).
//
//   text   t0 t1 t2 ... t(n-1)
//   bos < 0:   window w = t[w*c .. (w+1)*c)                        c = context
//   bos >= 0:  window w = [bos] + t[w*(c-1) .. (w+1)*(c-1))        (for tokenizers that add BOS)
//
// Only whole windows are kept; the text's tail shorter than a window is not scored.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace inflight::eval {

// At most `max_windows` windows (0: all). Throws Error(kInvalidArgument) for context < 2 and for
// a text shorter than one window (naming both sizes).
std::vector<std::vector<int32_t>> split_windows(std::span<const int32_t> tokens, int32_t context,
                                                int32_t max_windows, int32_t bos);

}  // namespace inflight::eval
