// The KServe v2 gRPC side of `inflight bench serve --backend kserve-grpc`: each request is one
// ModelStreamInfer stream (Triton's decoupled streaming, stream=true) on a shared channel,
// driven by gRPC's callback API; every response's text_output is a token chunk, recorded with
// the time it arrived (read on the gRPC thread that received it) and handed to the benchmark's
// io_context, so the recorder is only touched there. No gRPC header leaks out of the .cc.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <memory>
#include <string>
#include <vector>

#include "bench/datasets.h"
#include "bench/sse_client.h"

namespace inflight::bench {

class StreamRecorder;

class KServeGrpcClient {
 public:
  // `target`: "host:port"; `model`: the model name of every request.
  KServeGrpcClient(const std::string& target, std::string model, std::string api_key);
  ~KServeGrpcClient();

  // Builds the request messages (before the clock starts): text_input, max_tokens, stream,
  // greedy; `ignore_eos` adds inflight's ignore_eos input.
  void prepare(const std::vector<BenchRequest>& requests, bool ignore_eos);

  // Streams request `i` into `recorder`; completes on `io`'s thread once the stream ended.
  boost::asio::awaitable<void> stream(boost::asio::io_context& io, size_t i,
                                      StreamRecorder& recorder, const BenchClock& clock);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inflight::bench
