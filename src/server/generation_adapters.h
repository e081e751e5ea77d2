// The HTTP side of a frontend::Generation: GenerationStream (an SSE body of the formatter's
// events) and GenerationCollector (a deferred whole JSON response), both polled on the
// connection's strand. The response owns the adapter, the adapter owns the Generation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frontend/generation.h"
#include "server/http.h"

namespace inflight::server {

class GenerationStream final : public StreamBody {
 public:
  GenerationStream(std::shared_ptr<frontend::Generation> generation,
                   std::unique_ptr<frontend::StreamFormatter> formatter,
                   std::vector<std::string> prologue = {});
  void start(std::function<void()> wake) override;
  bool poll(std::string& out) override;
  // Cancels the engine requests; each then finishes with FinishReason::kAbort, and the
  // formatter's final events follow as for any other finish.
  void abort() override;
  void cancel() override;

 private:
  std::shared_ptr<frontend::Generation> generation_;
  std::unique_ptr<frontend::StreamFormatter> formatter_;
  std::vector<std::string> prologue_;  // sent with the first poll (e.g. the chat role chunks)
  std::vector<frontend::TaggedOutput> outputs_;
  std::vector<std::string> events_;
  bool done_ = false;
};

class GenerationCollector final : public DeferredResponse {
 public:
  using Render = std::function<nlohmann::ordered_json(frontend::GenerationResult&)>;
  GenerationCollector(std::shared_ptr<frontend::Generation> generation, int32_t n,
                      Render render);
  void start(std::function<void()> wake) override;
  std::optional<HttpResponse> poll() override;
  void cancel() override;

 private:
  std::shared_ptr<frontend::Generation> generation_;
  int32_t n_;
  Render render_;
  frontend::GenerationResult result_;
  std::vector<frontend::TaggedOutput> outputs_;
};

// The response of a started generation: an SSE stream or a deferred JSON body.
HttpResponse generation_response(frontend::StartedGeneration started);

}  // namespace inflight::server
