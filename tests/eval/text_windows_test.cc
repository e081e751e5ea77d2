#include <gtest/gtest.h>

#include <numeric>

#include "core/check.h"
#include "eval/text_windows.h"

namespace inflight::eval {
namespace {

std::vector<int32_t> iota_tokens(int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 100);
  return t;
}

TEST(TextWindows, ConsecutiveWholeWindows) {
  const std::vector<int32_t> tokens = iota_tokens(23);
  const auto w = split_windows(tokens, 7, 0, -1);
  ASSERT_EQ(w.size(), 3u);  // 23 / 7; the tail of 2 is not scored
  EXPECT_EQ(w[0], (std::vector<int32_t>{100, 101, 102, 103, 104, 105, 106}));
  EXPECT_EQ(w[2].front(), 114);
  EXPECT_EQ(w[2].back(), 120);
  EXPECT_EQ(split_windows(tokens, 7, 2, -1).size(), 2u);   // --max-windows
  EXPECT_EQ(split_windows(tokens, 7, 10, -1).size(), 3u);  // more than the text has
}

TEST(TextWindows, BosStartsEachWindow) {
  const auto w = split_windows(iota_tokens(10), 4, 0, 1);
  ASSERT_EQ(w.size(), 3u);  // 3 text tokens per window
  EXPECT_EQ(w[0], (std::vector<int32_t>{1, 100, 101, 102}));
  EXPECT_EQ(w[1], (std::vector<int32_t>{1, 103, 104, 105}));
}

TEST(TextWindows, RefusesWhatCannotBeScored) {
  EXPECT_THROW(split_windows(iota_tokens(5), 6, 0, -1), Error);  // shorter than a window
  EXPECT_THROW(split_windows(iota_tokens(5), 1, 0, -1), Error);  // nothing to predict
  EXPECT_THROW(split_windows(iota_tokens(5), 2, -1, -1), Error);
}

}  // namespace
}  // namespace inflight::eval
