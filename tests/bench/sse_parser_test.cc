#include "bench/sse_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace inflight::bench {
namespace {

std::vector<SseEvent> parse_in_pieces(const std::string& stream, size_t piece) {
  std::vector<SseEvent> events;
  SseParser parser([&](const SseEvent& e) { events.push_back(e); });
  for (size_t i = 0; i < stream.size(); i += piece) parser.feed(stream.substr(i, piece));
  parser.finish();
  return events;
}

TEST(SseParser, SplitsEventsWhateverThePieceSize) {
  const std::string stream =
      "data: {\"a\":1}\n\n"
      ": keep-alive ping\n\n"
      "data: first line\ndata: second line\n\n"
      "event: error\ndata: {\"error\":\"x\"}\r\n\r\n"
      "data:no-space\r\rdata: [DONE]\n\n";
  for (size_t piece : {1u, 2u, 3u, 7u, 1000u}) {
    SCOPED_TRACE(piece);
    const auto events = parse_in_pieces(stream, piece);
    ASSERT_EQ(events.size(), 5u);
    EXPECT_EQ(events[0].data, "{\"a\":1}");
    EXPECT_EQ(events[0].event, "");
    EXPECT_EQ(events[1].data, "first line\nsecond line");
    EXPECT_EQ(events[2].event, "error");
    EXPECT_EQ(events[2].data, "{\"error\":\"x\"}");
    EXPECT_EQ(events[3].data, "no-space");
    EXPECT_EQ(events[4].data, "[DONE]");
  }
}

TEST(SseParser, CommentOnlyBlocksDispatchNothing) {
  const auto events = parse_in_pieces(":ping\n\n:ping\n\n", 4);
  EXPECT_TRUE(events.empty());
}

TEST(SseParser, FinishDispatchesAnUnterminatedLastEvent) {
  const auto events = parse_in_pieces("data: a\n\ndata: b", 100);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].data, "b");
}

TEST(SseParser, CrLfSplitAcrossFeedsIsOneLineEnd) {
  std::vector<SseEvent> events;
  SseParser parser([&](const SseEvent& e) { events.push_back(e); });
  parser.feed("data: a\r");
  parser.feed("\n\r");
  parser.feed("\ndata: b\r\n\r\n");
  EXPECT_EQ(parser.num_events(), 2u);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].data, "a");
  EXPECT_EQ(events[1].data, "b");
}

}  // namespace
}  // namespace inflight::bench
