#include "server/sse.h"

#include <gtest/gtest.h>

namespace inflight::server {
namespace {

TEST(Sse, OneLinePayload) {
  std::string out;
  append_sse_event(out, R"({"a":1})");
  EXPECT_EQ(out, "data: {\"a\":1}\n\n");
  out += kSseDone;
  EXPECT_EQ(out, "data: {\"a\":1}\n\ndata: [DONE]\n\n");
}

TEST(Sse, NamedEvent) {
  std::string out;
  append_sse_event(out, "x", "error");
  EXPECT_EQ(out, "event: error\ndata: x\n\n");
}

TEST(Sse, MultiLinePayloadSplitsIntoDataFields) {
  std::string out;
  append_sse_event(out, "a\nb\r\nc\rd");
  EXPECT_EQ(out, "data: a\ndata: b\ndata: c\ndata: d\n\n");
}

TEST(Sse, EmptyAndTrailingNewline) {
  std::string out;
  append_sse_event(out, "");
  EXPECT_EQ(out, "data: \n\n");
  out.clear();
  append_sse_event(out, "a\n");
  EXPECT_EQ(out, "data: a\ndata: \n\n");
}

}  // namespace
}  // namespace inflight::server
