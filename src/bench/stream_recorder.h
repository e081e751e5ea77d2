// RequestRecord: what the client measured for one request. StreamRecorder fills it in from the
// SSE events of an OpenAI-compatible streaming response (or the text_output of each KServe gRPC
// stream response), each stamped with the time it arrived.
//
// Definitions (times in seconds on the benchmark clock; see docs/benchmarks.md):
//   token chunk   an event whose choices[0] carries non-empty text: `text` for
//                 /v1/completions, `delta.content` (or `delta.reasoning_content`) for
//                 /v1/chat/completions. Role-only and finish-only chunks are not token chunks.
//   TTFT          first token chunk - request start.
//   ITL           gap between consecutive token chunks (one entry per later token chunk, however
//                 many tokens it carries).
//   E2E latency   last token chunk - request start.
//   output tokens usage.completion_tokens of the final usage chunk (stream_options.include_usage);
//                 -1 when the server sent none (metrics.h then counts them another way).
// A request succeeds when the HTTP exchange completed cleanly with status 200 and at least one
// token chunk arrived; otherwise `error` says why.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace inflight::bench {

struct SseEvent;

enum class Endpoint { kCompletions, kChatCompletions };

struct RequestRecord {
  enum class State { kPending, kInFlight, kDone };

  // What was asked.
  int32_t prompt_len = 0;
  int32_t expected_output_len = 0;

  State state = State::kPending;
  bool success = false;
  double start_time = 0.0;
  double ttft = 0.0;
  double latency = 0.0;
  std::vector<double> itl;
  int32_t output_tokens = -1;
  int32_t num_token_chunks = 0;
  std::string generated_text;
  std::string finish_reason;
  std::string error;
};

class StreamRecorder {
 public:
  StreamRecorder(Endpoint endpoint, RequestRecord& record) : endpoint_(endpoint), r_(record) {}

  // The request is being sent at time t: pending -> in flight.
  void start(double t);
  // One SSE event (a JSON chunk, "[DONE]" or an error event) that arrived at time t.
  void on_event(const SseEvent& event, double t);
  // The text of one streamed response that arrived at time t, from a transport without SSE
  // (KServe gRPC): a token chunk when not empty.
  void on_text(const std::string& text, double t);
  // The transport or the HTTP exchange failed: in flight -> done, not successful.
  void fail(std::string error);
  // The response ended cleanly: in flight -> done; successful if a token chunk arrived.
  void finish();
  bool done() const { return r_.state == RequestRecord::State::kDone; }

 private:
  void on_token_chunk(const std::string& text, double t);

  Endpoint endpoint_;
  RequestRecord& r_;
  double last_token_time_ = 0.0;
  bool failed_ = false;
};

}  // namespace inflight::bench
