// ScriptedSseServer: an HTTP/1.1 server on 127.0.0.1 for the benchmark client's tests and load
// measurements. It runs its own thread (one io_context, coroutines), so it handles thousands of
// connections at once.
//
// Two ways to answer a request:
//   scripted   the n-th request (in arrival order) gets the n-th ScriptedResponse: raw bytes
//              written piece by piece, optionally a pause before a piece, then the connection is
//              closed or kept for the next request.
//   synthetic  every request gets a 200 SSE stream of `num_chunks` completion chunks, one every
//              `interval`, each carrying `tokens_per_chunk` tokens, then a usage chunk and
//              [DONE] (for load tests).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace inflight::bench::testing {

struct ScriptedResponse {
  struct Piece {
    std::string bytes;
    std::chrono::milliseconds delay_before{0};
  };
  std::vector<Piece> pieces;
  bool close_after = true;
};

struct SyntheticStreams {
  int32_t num_chunks = 16;
  int32_t tokens_per_chunk = 1;
  std::chrono::microseconds interval{10000};
};

// Response builders. `events` are SSE data payloads (JSON text or "[DONE]").
// A 200 text/event-stream response with chunked transfer encoding, one HTTP chunk per event.
ScriptedResponse sse_response(const std::vector<std::string>& events, bool close_after = true);
// Any status with a small JSON error body.
ScriptedResponse error_response(int status, const std::string& message);
// A completions chunk carrying `text` (and a finish reason when given).
std::string completion_chunk(const std::string& text, const std::string& finish_reason = "");
// A chat chunk: delta with `content` (or only the role when role_only).
std::string chat_chunk(const std::string& content, bool role_only = false);
// A usage-only chunk (choices: []).
std::string usage_chunk(int32_t prompt_tokens, int32_t completion_tokens);

class ScriptedSseServer {
 public:
  explicit ScriptedSseServer(std::vector<ScriptedResponse> responses);
  explicit ScriptedSseServer(SyntheticStreams synthetic);
  ~ScriptedSseServer();
  ScriptedSseServer(const ScriptedSseServer&) = delete;
  ScriptedSseServer& operator=(const ScriptedSseServer&) = delete;

  uint16_t port() const;
  std::string base_url() const;
  // Bodies of the requests received so far, in arrival order (scripted mode only).
  std::vector<std::string> request_bodies() const;
  // Paths ("target") of the requests received so far.
  std::vector<std::string> request_targets() const;
  int64_t num_connections() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace inflight::bench::testing
