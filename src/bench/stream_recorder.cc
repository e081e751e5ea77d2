#include "bench/stream_recorder.h"

#include <nlohmann/json.hpp>

#include "bench/sse_parser.h"

namespace inflight::bench {
namespace {

using nlohmann::json;

// The text a chunk's first choice carries, or empty.
std::string choice_text(const json& choice, Endpoint endpoint) {
  if (endpoint == Endpoint::kCompletions) {
    const auto it = choice.find("text");
    return (it != choice.end() && it->is_string()) ? it->get<std::string>() : std::string();
  }
  const auto delta = choice.find("delta");
  if (delta == choice.end() || !delta->is_object()) return {};
  for (const char* key : {"content", "reasoning_content"}) {
    const auto it = delta->find(key);
    if (it != delta->end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
      return it->get<std::string>();
    }
  }
  return {};
}

std::string error_message(const json& error) {
  if (error.is_string()) return error.get<std::string>();
  if (error.is_object()) {
    const auto it = error.find("message");
    if (it != error.end() && it->is_string()) return it->get<std::string>();
  }
  return error.dump();
}

}  // namespace

void StreamRecorder::start(double t) {
  r_.state = RequestRecord::State::kInFlight;
  r_.start_time = t;
}

void StreamRecorder::on_event(const SseEvent& event, double t) {
  if (failed_) return;
  if (event.data == "[DONE]") return;
  const json chunk = json::parse(event.data, nullptr, /*allow_exceptions=*/false);
  if (chunk.is_discarded()) {
    fail("invalid JSON in a stream chunk: " + event.data.substr(0, 200));
    return;
  }
  if (event.event == "error" || (chunk.is_object() && chunk.contains("error"))) {
    fail("server error in stream: " +
         error_message(chunk.is_object() && chunk.contains("error") ? chunk["error"] : chunk));
    return;
  }
  if (!chunk.is_object()) return;
  const auto choices = chunk.find("choices");
  if (choices != chunk.end() && choices->is_array() && !choices->empty()) {
    const json& choice = (*choices)[0];
    if (choice.is_object()) {
      const std::string text = choice_text(choice, endpoint_);
      if (!text.empty()) on_token_chunk(text, t);
      const auto reason = choice.find("finish_reason");
      if (reason != choice.end() && reason->is_string())
        r_.finish_reason = reason->get<std::string>();
    }
  }
  const auto usage = chunk.find("usage");
  if (usage != chunk.end() && usage->is_object()) {
    const auto tokens = usage->find("completion_tokens");
    if (tokens != usage->end() && tokens->is_number_integer()) {
      r_.output_tokens = tokens->get<int32_t>();
    }
  }
}

void StreamRecorder::on_text(const std::string& text, double t) {
  if (r_.state != RequestRecord::State::kInFlight || text.empty()) return;
  on_token_chunk(text, t);
}

void StreamRecorder::on_token_chunk(const std::string& text, double t) {
  if (r_.num_token_chunks == 0) {
    r_.ttft = t - r_.start_time;
  } else {
    r_.itl.push_back(t - last_token_time_);
  }
  last_token_time_ = t;
  r_.latency = t - r_.start_time;
  ++r_.num_token_chunks;
  r_.generated_text += text;
}

void StreamRecorder::fail(std::string error) {
  if (failed_ || r_.state == RequestRecord::State::kDone) return;
  failed_ = true;
  r_.state = RequestRecord::State::kDone;
  r_.success = false;
  r_.error = std::move(error);
}

void StreamRecorder::finish() {
  if (failed_ || r_.state == RequestRecord::State::kDone) return;
  r_.state = RequestRecord::State::kDone;
  r_.success = r_.num_token_chunks > 0;
  if (!r_.success) r_.error = "the stream carried no token chunk, so TTFT is undefined";
}

}  // namespace inflight::bench
