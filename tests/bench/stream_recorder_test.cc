#include "bench/stream_recorder.h"

#include <gtest/gtest.h>

#include "bench/sse_parser.h"
#include "scripted_sse_server.h"

namespace inflight::bench {
namespace {

using testing::chat_chunk;
using testing::completion_chunk;
using testing::usage_chunk;

SseEvent data(const std::string& payload) {
  return SseEvent{"", payload};
}

TEST(StreamRecorder, CompletionsTimingsSkipEmptyChunks) {
  RequestRecord r;
  StreamRecorder rec(Endpoint::kCompletions, r);
  rec.start(100.0);
  EXPECT_EQ(r.state, RequestRecord::State::kInFlight);
  rec.on_event(data(completion_chunk("")), 100.5);             // empty first chunk: no token
  rec.on_event(data(completion_chunk("Hello")), 101.0);        // TTFT
  rec.on_event(data(completion_chunk(" big world")), 101.25);  // several tokens, one ITL entry
  rec.on_event(data(completion_chunk("", "length")), 101.5);   // finish only
  rec.on_event(data(usage_chunk(7, 3)), 101.75);
  rec.on_event(data("[DONE]"), 102.0);
  rec.finish();
  EXPECT_TRUE(r.success);
  EXPECT_EQ(r.state, RequestRecord::State::kDone);
  EXPECT_DOUBLE_EQ(r.ttft, 1.0);
  ASSERT_EQ(r.itl.size(), 1u);
  EXPECT_DOUBLE_EQ(r.itl[0], 0.25);
  EXPECT_DOUBLE_EQ(r.latency, 1.25);  // the last token chunk, not [DONE]
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_EQ(r.num_token_chunks, 2);
  EXPECT_EQ(r.generated_text, "Hello big world");
  EXPECT_EQ(r.finish_reason, "length");
}

TEST(StreamRecorder, ChatRoleChunkIsNotTheFirstToken) {
  RequestRecord r;
  StreamRecorder rec(Endpoint::kChatCompletions, r);
  rec.start(0.0);
  rec.on_event(data(chat_chunk("", /*role_only=*/true)), 0.125);
  rec.on_event(data(chat_chunk("Hi")), 0.5);
  rec.on_event(data(chat_chunk("!")), 0.75);
  rec.finish();
  EXPECT_TRUE(r.success);
  EXPECT_DOUBLE_EQ(r.ttft, 0.5);
  EXPECT_DOUBLE_EQ(r.latency, 0.75);
  EXPECT_EQ(r.output_tokens, -1);  // no usage chunk
  EXPECT_EQ(r.generated_text, "Hi!");
}

TEST(StreamRecorder, NoTokenChunkFails) {
  RequestRecord r;
  StreamRecorder rec(Endpoint::kCompletions, r);
  rec.start(0.0);
  rec.on_event(data(completion_chunk("", "stop")), 1.0);
  rec.on_event(data(usage_chunk(3, 0)), 1.0);
  rec.finish();
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("no token chunk"), std::string::npos);
}

TEST(StreamRecorder, ErrorEventsAndBadJsonFail) {
  {
    RequestRecord r;
    StreamRecorder rec(Endpoint::kCompletions, r);
    rec.start(0.0);
    rec.on_event(data(completion_chunk("a")), 1.0);
    rec.on_event(data(R"({"error": {"message": "out of memory"}})"), 2.0);
    EXPECT_TRUE(rec.done());
    rec.finish();  // no effect after a failure
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("out of memory"), std::string::npos);
  }
  {
    RequestRecord r;
    StreamRecorder rec(Endpoint::kCompletions, r);
    rec.start(0.0);
    rec.on_event(data("{not json"), 1.0);
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("invalid JSON"), std::string::npos);
  }
  {
    RequestRecord r;
    StreamRecorder rec(Endpoint::kCompletions, r);
    rec.start(0.0);
    rec.on_event(SseEvent{"error", R"({"message": "boom"})"}, 1.0);
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("boom"), std::string::npos);
  }
}

}  // namespace
}  // namespace inflight::bench
