#include "server/grpc/grpc_server.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/check.h"
#include "frontend/kserve_api.h"
#include "grpc_service.grpc.pb.h"
#include "server/api_key.h"
#include "server/grpc/call_pump.h"
#include "server/grpc/kserve_messages.h"

namespace inflight::server {

namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

// What every call shares.
struct CallEnv {
  frontend::ModelRegistry& registry;
  CallPump& pump;
  std::string api_key;
  bool explicit_model_control = false;

  bool authorized(grpc::CallbackServerContext* ctx) const {
    if (api_key.empty()) return true;
    const auto& md = ctx->client_metadata();
    if (md.count("authorization") != 1) return false;
    const auto it = md.find("authorization");
    const std::string value(it->second.data(), it->second.size());
    return authorization_matches(&value, api_key);
  }
};

const grpc::Status kUnauthenticated(grpc::StatusCode::UNAUTHENTICATED,
                                    "invalid or missing API key");

int64_t token_count(const std::vector<frontend::TaggedOutput>& outputs) {
  int64_t n = 0;
  for (const auto& o : outputs) n += static_cast<int64_t>(o.output.token_ids.size());
  return n;
}

// Wakes `call` on the pump whenever its generation has outputs.
template <typename Call>
void wake_on_outputs(const std::shared_ptr<Call>& call, frontend::Generation& generation,
                     CallPump& pump) {
  std::weak_ptr<Call> weak = call;
  generation.set_wake([weak, &pump] {
    if (auto c = weak.lock()) pump.wake(c);
  });
}

// ModelInfer: one generation, one response once it has finished.
class InferCall final : public grpc::ServerUnaryReactor,
                        public PumpedCall,
                        public std::enable_shared_from_this<InferCall> {
 public:
  InferCall(CallEnv& env, ModelInferResponse* response) : env_(env), response_(response) {}

  void begin(grpc::CallbackServerContext* ctx, const ModelInferRequest& request) {
    if (!env_.authorized(ctx)) return Finish(kUnauthenticated);
    try {
      const auto fe = frontend::resolve_kserve_model(env_.registry, request.model_name(),
                                                     request.model_version());
      generation_ = frontend::start_kserve_generation(*fe, to_kserve_request(request), false);
    } catch (...) {
      return Finish(current_grpc_status("ModelInfer"));
    }
    std::lock_guard lock(mutex_);
    wake_on_outputs(shared_from_this(), *generation_.generation, env_.pump);
  }

  void pump() override {
    std::unique_lock lock(mutex_);
    if (finished_) return;
    outputs_.clear();
    const bool done = generation_.generation->take(outputs_);
    frontend::add_kserve_outputs(text_, outputs_);
    frontend::Frontend& fe = generation_.generation->frontend();
    fe.add_tokens_sent(token_count(outputs_));
    if (!done) return;
    finished_ = true;
    grpc::Status status;
    if (text_.error) {
      status = grpc::Status(grpc::StatusCode::INTERNAL, *text_.error);
    } else {
      const frontend::TrtLlmRequest& req = generation_.request;
      fill_infer_response(*response_, fe.options().served_model_name, generation_,
                          req.exclude_input_in_output ? text_.text : req.text_input + text_.text,
                          text_.log_probs, true);
    }
    generation_.generation.reset();  // frees the slot now
    lock.unlock();
    Finish(status);
  }

  void OnCancel() override {
    std::lock_guard lock(mutex_);
    if (generation_.generation) generation_.generation->cancel();
  }

  void OnDone() override {
    auto self = std::move(self_);  // may destroy this on return
  }

  std::shared_ptr<InferCall> self_;  // held until OnDone

 private:
  CallEnv& env_;
  ModelInferResponse* response_;
  std::mutex mutex_;  // guards the members below (and the Generation's take/cancel)
  frontend::KServeGeneration generation_;
  frontend::KServeText text_;
  std::vector<frontend::TaggedOutput> outputs_;
  bool finished_ = false;
};

// ModelStreamInfer: decoupled responses for any number of requests on one stream. Responses
// queue up and are written one at a time (gRPC allows one write in flight); the stream finishes
// once the client has stopped sending and every request has sent its final response.
class StreamCall final
    : public grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>,
      public PumpedCall,
      public std::enable_shared_from_this<StreamCall> {
 public:
  explicit StreamCall(CallEnv& env) : env_(env) {}

  void begin(grpc::CallbackServerContext* ctx) {
    if (!env_.authorized(ctx)) {
      finished_ = true;
      return Finish(kUnauthenticated);
    }
    reading_ = true;
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (ok) accept(request_);
    bool read_more = false;
    {
      std::lock_guard lock(mutex_);
      read_more = ok && !cancelled_;
      reading_ = read_more;  // set before StartRead: no Finish while a read is in flight
    }
    if (read_more) StartRead(&request_);
    send_or_finish();
  }

  void pump() override {
    {
      std::lock_guard lock(mutex_);
      if (finished_) return;
      for (size_t i = 0; i < active_.size();) {
        if (pump_one(active_[i])) {
          active_.erase(active_.begin() + static_cast<ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
    }
    send_or_finish();
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard lock(mutex_);
      writing_ = false;
      if (!ok) cancel_all();  // the stream broke: nothing more can be sent
    }
    send_or_finish();
  }

  void OnCancel() override {
    {
      std::lock_guard lock(mutex_);
      cancel_all();
    }
    send_or_finish();
  }

  void OnDone() override {
    auto self = std::move(self_);  // may destroy this on return
  }

  std::shared_ptr<StreamCall> self_;  // held until OnDone

 private:
  struct Active {
    frontend::KServeGeneration generation;
    frontend::KServeText text;  // whole responses: accumulated until the end
  };

  void accept(const ModelInferRequest& request) {
    try {
      const auto fe = frontend::resolve_kserve_model(env_.registry, request.model_name(),
                                                     request.model_version());
      frontend::KServeGeneration g =
          frontend::start_kserve_generation(*fe, to_kserve_request(request), true);
      std::lock_guard lock(mutex_);
      if (cancelled_) return;  // dropping g cancels it
      wake_on_outputs(shared_from_this(), *g.generation, env_.pump);
      active_.push_back({std::move(g), {}});
    } catch (...) {
      // Triton's decoupled error: a response with error_message; the stream goes on.
      const grpc::Status status = current_grpc_status("ModelStreamInfer");
      std::lock_guard lock(mutex_);
      ModelStreamInferResponse& r = queue_.emplace_back();
      r.set_error_message(status.error_message());
      r.mutable_infer_response()->set_id(request.id());
      r.mutable_infer_response()->set_model_name(request.model_name());
    }
  }

  // Queues the responses of `a`'s new outputs; true once it has sent its final one.
  bool pump_one(Active& a) {
    outputs_.clear();
    const bool done = a.generation.generation->take(outputs_);
    frontend::Frontend& fe = a.generation.generation->frontend();
    fe.add_tokens_sent(token_count(outputs_));
    const frontend::TrtLlmRequest& req = a.generation.request;
    const std::string model = fe.options().served_model_name;
    if (req.stream) {
      frontend::KServeText chunk;
      frontend::add_kserve_outputs(chunk, outputs_);
      if (chunk.error) return queue_error(a, *chunk.error);
      if (!chunk.text.empty() || done) {
        fill_infer_response(*queue_.emplace_back().mutable_infer_response(), model, a.generation,
                            chunk.text, chunk.log_probs, done);
      }
      return done;
    }
    frontend::add_kserve_outputs(a.text, outputs_);
    if (a.text.error) return queue_error(a, *a.text.error);
    if (done) {
      fill_infer_response(*queue_.emplace_back().mutable_infer_response(), model, a.generation,
                          req.exclude_input_in_output ? a.text.text : req.text_input + a.text.text,
                          a.text.log_probs, true);
    }
    return done;
  }

  bool queue_error(const Active& a, const std::string& message) {
    ModelStreamInferResponse& r = queue_.emplace_back();
    r.set_error_message(message);
    r.mutable_infer_response()->set_id(a.generation.id);
    return true;
  }

  // Cancels every generation; what is queued will not be sent.
  void cancel_all() {
    cancelled_ = true;
    active_.clear();  // dropping a Generation cancels its engine requests
    queue_.clear();
  }

  // Starts the next write, or finishes the stream when nothing is left to send. gRPC methods
  // are called without the lock held (a reaction may run inline).
  void send_or_finish() {
    std::unique_lock lock(mutex_);
    if (finished_ || writing_) return;
    if (!queue_.empty() && !cancelled_) {
      writing_ = true;
      current_ = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      StartWrite(&current_);
      return;
    }
    // A cancelled stream still waits for its read in flight, which then fails at once.
    if (!reading_ && (cancelled_ || (active_.empty() && queue_.empty()))) {
      finished_ = true;
      const bool cancelled = cancelled_;
      lock.unlock();
      Finish(cancelled ? grpc::Status::CANCELLED : grpc::Status::OK);
    }
  }

  CallEnv& env_;
  ModelInferRequest request_;  // the read in flight (reactions on reads are sequential)
  std::mutex mutex_;           // guards the members below (and every Generation's take/cancel)
  std::vector<Active> active_;
  std::deque<ModelStreamInferResponse> queue_;
  ModelStreamInferResponse current_;  // being written
  std::vector<frontend::TaggedOutput> outputs_;
  bool writing_ = false;
  bool reading_ = false;  // false once the client has stopped sending (or the call broke)
  bool cancelled_ = false;
  bool finished_ = false;
};

const grpc::Status kNoModelControl(grpc::StatusCode::UNAVAILABLE,
                                   "explicit model load / unload is not allowed: start the "
                                   "server with --model-control-mode explicit");

// A registry load or unload's outcome: NOT_FOUND for an unknown model, INVALID_ARGUMENT with
// the load's error.
grpc::Status repository_status(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(s.code() == StatusCode::kNotFound ? grpc::StatusCode::NOT_FOUND
                                                        : grpc::StatusCode::INVALID_ARGUMENT,
                      std::string(s.message()));
}

// Fills `message` from the protobuf JSON form the front end writes (kserve_api.h). Our
// messages are a subset of Triton's, so fields they lack (batch_stats) are passed over.
void from_json(const nlohmann::ordered_json& json, google::protobuf::Message& message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status = google::protobuf::util::JsonStringToMessage(json.dump(), &message, options);
  INFLIGHT_CHECK(status.ok(), "{} from JSON: {}", message.GetTypeName(), status.ToString());
}

grpc::ServerUnaryReactor* finish_unary(grpc::CallbackServerContext* ctx, grpc::Status status) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(std::move(status));
  return r;
}

class KServeService final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit KServeService(CallEnv env) : env_(std::move(env)) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx,
                                       const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* res) override {
    res->set_live(true);
    return finish_unary(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx,
                                        const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* res) override {
    res->set_ready(env_.registry.ready());
    return finish_unary(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx,
                                       const inference::ModelReadyRequest* req,
                                       inference::ModelReadyResponse* res) override {
    try {
      res->set_ready(
          frontend::resolve_kserve_model(env_.registry, req->name(), req->version())->ready());
    } catch (const frontend::ApiError&) {
      res->set_ready(false);  // not served (or not loaded)
    }
    return finish_unary(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* res) override {
    const auto meta = frontend::kserve_server_metadata();
    res->set_name(meta["name"].get<std::string>());
    res->set_version(meta["version"].get<std::string>());
    for (const auto& e : meta["extensions"]) res->add_extensions(e.get<std::string>());
    return finish_unary(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const inference::ModelMetadataRequest* req,
                                          inference::ModelMetadataResponse* res) override {
    std::shared_ptr<frontend::Frontend> fe;
    try {
      fe = frontend::resolve_kserve_model(env_.registry, req->name(), req->version());
    } catch (...) {
      return finish_unary(ctx, current_grpc_status("ModelMetadata"));
    }
    res->set_name(fe->options().served_model_name);
    res->add_versions(std::string(frontend::kKServeModelVersion));
    res->set_platform("ensemble");
    auto add = [](auto* list, const std::vector<frontend::TensorSpec>& specs) {
      for (const auto& s : specs) {
        auto* t = list->Add();
        t->set_name(std::string(s.name));
        t->set_datatype(std::string(s.datatype));
        for (int64_t d : s.shape) t->add_shape(d);
      }
    };
    add(res->mutable_inputs(), frontend::trtllm_inputs());
    add(res->mutable_outputs(), frontend::trtllm_outputs());
    return finish_unary(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const ModelInferRequest* req,
                                       ModelInferResponse* res) override {
    auto call = std::make_shared<InferCall>(env_, res);
    call->self_ = call;
    call->begin(ctx, *req);
    return call.get();
  }

  grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>* ModelStreamInfer(
      grpc::CallbackServerContext* ctx) override {
    auto call = std::make_shared<StreamCall>(env_);
    call->self_ = call;
    call->begin(ctx);
    return call.get();
  }

  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx,
                                        const inference::ModelConfigRequest* req,
                                        inference::ModelConfigResponse* res) override {
    if (!env_.authorized(ctx)) return finish_unary(ctx, kUnauthenticated);
    try {
      const auto fe = frontend::resolve_kserve_model(env_.registry, req->name(), req->version());
      from_json(frontend::kserve_model_config(*fe), *res->mutable_config());
    } catch (...) {
      return finish_unary(ctx, current_grpc_status("ModelConfig"));
    }
    return finish_unary(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx,
                                            const inference::ModelStatisticsRequest* req,
                                            inference::ModelStatisticsResponse* res) override {
    if (!env_.authorized(ctx)) return finish_unary(ctx, kUnauthenticated);
    try {
      std::vector<std::shared_ptr<frontend::Frontend>> models;
      if (req->name().empty()) {
        models = env_.registry.frontends();
      } else {
        models.push_back(
            frontend::resolve_kserve_model(env_.registry, req->name(), req->version()));
      }
      for (const auto& fe : models) {
        if (fe->ready()) from_json(frontend::kserve_model_statistics(*fe), *res->add_model_stats());
      }
    } catch (...) {
      return finish_unary(ctx, current_grpc_status("ModelStatistics"));
    }
    return finish_unary(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx,
                                            const inference::RepositoryIndexRequest* req,
                                            inference::RepositoryIndexResponse* res) override {
    if (!env_.authorized(ctx)) return finish_unary(ctx, kUnauthenticated);
    for (const frontend::ModelStatus& m : env_.registry.index()) {
      if (req->ready() && m.state != frontend::ModelState::kReady) continue;
      auto* entry = res->add_models();
      entry->set_name(m.name);
      entry->set_version(std::string(frontend::kKServeModelVersion));
      entry->set_state(frontend::model_state_name(m.state));
      entry->set_reason(m.reason);
    }
    return finish_unary(ctx, grpc::Status::OK);
  }

  // Answered once the load has finished, from the registry's thread.
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* ctx,
                                                const inference::RepositoryModelLoadRequest* req,
                                                inference::RepositoryModelLoadResponse*) override {
    if (!env_.authorized(ctx)) return finish_unary(ctx, kUnauthenticated);
    if (!env_.explicit_model_control) return finish_unary(ctx, kNoModelControl);
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    env_.registry.load_async(req->model_name(),
                             [reactor](Status s) { reactor->Finish(repository_status(s)); });
    return reactor;
  }

  grpc::ServerUnaryReactor* RepositoryModelUnload(
      grpc::CallbackServerContext* ctx, const inference::RepositoryModelUnloadRequest* req,
      inference::RepositoryModelUnloadResponse*) override {
    if (!env_.authorized(ctx)) return finish_unary(ctx, kUnauthenticated);
    if (!env_.explicit_model_control) return finish_unary(ctx, kNoModelControl);
    return finish_unary(ctx, repository_status(env_.registry.unload(req->model_name())));
  }

 private:
  CallEnv env_;
};

std::string listen_address(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

// Members are destroyed in reverse: the server (all calls done) before the service and the
// pump the calls use.
struct GrpcServer::Impl {
  Impl(GrpcServerConfig c, frontend::ModelRegistry& registry)
      : config(std::move(c)),
        service(CallEnv{registry, pump, config.api_key, config.explicit_model_control}) {}

  GrpcServerConfig config;
  CallPump pump;
  KServeService service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::once_flag shutdown_once;
  std::thread shutdown_thread;
};

GrpcServer::GrpcServer(GrpcServerConfig config, frontend::ModelRegistry& registry)
    : impl_(std::make_unique<Impl>(std::move(config), registry)) {}

GrpcServer::~GrpcServer() {
  shutdown(0);
  if (impl_->shutdown_thread.joinable()) impl_->shutdown_thread.join();
  impl_->server.reset();
}

void GrpcServer::start() {
  const std::string address = listen_address(impl_->config.host, impl_->config.port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &impl_->port);
  builder.RegisterService(&impl_->service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(impl_->config.max_message_bytes));
  // Without SO_REUSEPORT a second server on the port fails here instead of sharing it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  impl_->server = builder.BuildAndStart();
  INFLIGHT_CHECK_CODE(impl_->server && impl_->port != 0, ErrorCode::kInvalidArgument,
                      "gRPC: cannot listen on {} (is the port in use? --grpc-port 0 turns gRPC "
                      "off)",
                      address);
}

int GrpcServer::port() const {
  return impl_->port;
}

void GrpcServer::shutdown(double timeout_s) {
  if (!impl_->server) return;
  std::call_once(impl_->shutdown_once, [&] {
    const auto deadline = std::chrono::system_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    impl_->shutdown_thread =
        std::thread([server = impl_->server.get(), deadline] { server->Shutdown(deadline); });
  });
}

}  // namespace inflight::server
