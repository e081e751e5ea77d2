// GrpcServer: the KServe v2 gRPC endpoint (inference.GRPCInferenceService, as Triton serves it)
// over the same models (frontend/model_registry.h) as the HTTP server. No gRPC header leaks out of
// this directory.
//
//   ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata,
//   ModelConfig, ModelStatistics                                         unary
//   RepositoryIndex, RepositoryModelLoad, RepositoryModelUnload          unary (Triton's model
//                  repository extension; load and unload need explicit model control, else
//                  UNAVAILABLE; a load answers once done, with its error as INVALID_ARGUMENT)
//   ModelInfer         unary: one request, one response (stream=true is INVALID_ARGUMENT)
//   ModelStreamInfer   bidirectional, decoupled: each request read starts a generation; with
//                      stream=true it answers one response per chunk of new text, else one
//                      whole response; every request's last response has the bool parameter
//                      triton_final_response = true. A request that fails answers a response
//                      with error_message and the stream goes on.
//
// Threads: gRPC's callback API runs the reactions on its own small pool, so thousands of
// streams need no thread each; engine outputs wake one pump thread (call_pump.h) that turns
// them into responses. A call the client cancels (or whose deadline passes, or that is still
// running when shutdown's deadline passes) cancels its engine requests, freeing their KV blocks.
//
// Errors map to gRPC codes: malformed tensors, missing inputs INVALID_ARGUMENT; unknown model
// or version NOT_FOUND; at capacity RESOURCE_EXHAUSTED; loading or shutting down UNAVAILABLE;
// a wrong or missing API key (metadata "authorization: Bearer KEY") UNAUTHENTICATED.
#pragma once

#include <memory>
#include <string>

#include "frontend/model_registry.h"

namespace inflight::server {

struct GrpcServerConfig {
  std::string host = "127.0.0.1";
  int port = 8001;      // 0 = pick a free port (see GrpcServer::port)
  std::string api_key;  // empty: none needed
  int64_t max_message_bytes = 8 << 20;
  bool explicit_model_control = false;  // RepositoryModelLoad / Unload allowed
};

class GrpcServer {
 public:
  // `registry` outlives the server.
  GrpcServer(GrpcServerConfig config, frontend::ModelRegistry& registry);
  ~GrpcServer();  // shuts down (at once) if still serving

  // Binds and starts serving; throws inflight::Error when the address cannot be bound.
  void start();
  int port() const;
  // Refuses new calls (UNAVAILABLE), lets in-flight ones run up to `timeout_s`, then cancels
  // them. Returns at once; the destructor waits. Idempotent, thread-safe.
  void shutdown(double timeout_s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inflight::server
