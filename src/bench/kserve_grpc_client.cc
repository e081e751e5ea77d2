#include "bench/kserve_grpc_client.h"

#include <grpcpp/grpcpp.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <condition_variable>
#include <cstring>
#include <mutex>

#include "bench/stream_recorder.h"
#include "grpc_service.grpc.pb.h"

namespace inflight::bench {

namespace asio = boost::asio;
using inference::ModelInferRequest;
using inference::ModelStreamInferResponse;

namespace {

// The one element of a raw BYTES tensor: a 4-byte little-endian length, then the bytes.
std::string raw_bytes(const std::string& s) {
  std::string raw(4 + s.size(), '\0');
  const uint32_t n = static_cast<uint32_t>(s.size());
  std::memcpy(raw.data(), &n, 4);
  std::memcpy(raw.data() + 4, s.data(), s.size());
  return raw;
}

template <typename T>
std::string raw_scalar(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(T));
}

void add_input(ModelInferRequest& r, const char* name, const char* datatype, std::string raw) {
  auto* in = r.add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  in->add_shape(1);
  in->add_shape(1);
  r.add_raw_input_contents(std::move(raw));
}

// text_output of a response, raw or typed.
std::string text_output(const inference::ModelInferResponse& r) {
  for (int i = 0; i < r.outputs_size(); ++i) {
    if (r.outputs(i).name() != "text_output") continue;
    if (i < r.raw_output_contents_size()) {
      const std::string& raw = r.raw_output_contents(i);
      return raw.size() > 4 ? raw.substr(4) : std::string();
    }
    const auto& bytes = r.outputs(i).contents().bytes_contents();
    return bytes.empty() ? std::string() : bytes[0];
  }
  return {};
}

// Streams not yet past OnDone; the client's destructor waits for none (gRPC must not shut
// down under a thread still finishing a stream).
struct LiveStreams {
  std::mutex mutex;
  std::condition_variable cv;
  int count = 0;
};

// One stream: writes the request, reads responses until the final one, then half-closes.
// Deletes itself when done, then hands the end to the io_context.
class Stream final : public grpc::ClientBidiReactor<ModelInferRequest, ModelStreamInferResponse> {
 public:
  Stream(asio::io_context& io, StreamRecorder& recorder, const BenchClock& clock,
         asio::steady_timer& done, LiveStreams& live)
      : io_(io), recorder_(recorder), clock_(clock), done_(done), live_(live) {
    std::lock_guard lock(live_.mutex);
    ++live_.count;
  }

  void start(inference::GRPCInferenceService::Stub& stub, const ModelInferRequest& request,
             const std::string& api_key) {
    if (!api_key.empty()) ctx_.AddMetadata("authorization", "Bearer " + api_key);
    stub.async()->ModelStreamInfer(&ctx_, this);
    StartWrite(&request);
    StartRead(&response_);
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (ok) StartWritesDone();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    const double t = clock_();
    if (!response_.error_message().empty()) {
      asio::post(io_, [&r = recorder_, e = response_.error_message()] { r.fail(e); });
    } else {
      asio::post(io_, [&r = recorder_, text = text_output(response_.infer_response()), t] {
        r.on_text(text, t);
      });
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    auto end = [&r = recorder_, &done = done_, ok = status.ok(), message = status.error_message()] {
      if (ok) {
        r.finish();
      } else {
        r.fail("gRPC: " + message);
      }
      done.cancel();
    };
    asio::io_context& io = io_;
    LiveStreams& live = live_;
    delete this;
    asio::post(io, std::move(end));
    std::lock_guard lock(live.mutex);
    if (--live.count == 0) live.cv.notify_all();
  }

 private:
  asio::io_context& io_;
  StreamRecorder& recorder_;
  const BenchClock& clock_;
  asio::steady_timer& done_;
  LiveStreams& live_;
  grpc::ClientContext ctx_;
  ModelStreamInferResponse response_;
};

}  // namespace

struct KServeGrpcClient::Impl {
  LiveStreams live;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub;
  std::string model;
  std::string api_key;
  std::vector<ModelInferRequest> requests;
};

KServeGrpcClient::KServeGrpcClient(const std::string& target, std::string model,
                                   std::string api_key)
    : impl_(std::make_unique<Impl>()) {
  impl_->channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  impl_->stub = inference::GRPCInferenceService::NewStub(impl_->channel);
  impl_->model = std::move(model);
  impl_->api_key = std::move(api_key);
}

KServeGrpcClient::~KServeGrpcClient() {
  std::unique_lock lock(impl_->live.mutex);
  impl_->live.cv.wait(lock, [&] { return impl_->live.count == 0; });
}

void KServeGrpcClient::prepare(const std::vector<BenchRequest>& requests, bool ignore_eos) {
  for (size_t i = 0; i < requests.size(); ++i) {
    ModelInferRequest& r = impl_->requests.emplace_back();
    r.set_model_name(impl_->model);
    r.set_id(std::to_string(i));
    add_input(r, "text_input", "BYTES", raw_bytes(requests[i].prompt));
    add_input(r, "max_tokens", "INT32", raw_scalar<int32_t>(requests[i].output_len));
    add_input(r, "stream", "BOOL", raw_scalar<uint8_t>(1));
    add_input(r, "exclude_input_in_output", "BOOL", raw_scalar<uint8_t>(1));
    if (ignore_eos) add_input(r, "ignore_eos", "BOOL", raw_scalar<uint8_t>(1));
  }
}

asio::awaitable<void> KServeGrpcClient::stream(asio::io_context& io, size_t i,
                                               StreamRecorder& recorder, const BenchClock& clock) {
  asio::steady_timer done(io, asio::steady_timer::time_point::max());
  recorder.start(clock());
  (new Stream(io, recorder, clock, done, impl_->live))
      ->start(*impl_->stub, impl_->requests[i], impl_->api_key);
  // Ends when OnDone (posted to `io`) cancels the timer.
  co_await done.async_wait(asio::as_tuple(asio::use_awaitable));
}

}  // namespace inflight::bench
