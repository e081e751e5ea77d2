#include "bench/collectives_bench.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "backend/backend_factory.h"
#include "core/check.h"
#include "core/dtype.h"
#include "parallel/world.h"
#include "runtime/communicator.h"

namespace inflight::bench {
namespace {

std::vector<int64_t> default_sizes() {
  std::vector<int64_t> sizes;
  for (int64_t b = int64_t{8} << 10; b <= int64_t{256} << 20; b *= b < (int64_t{1} << 20) ? 2 : 4) {
    sizes.push_back(b);
  }
  return sizes;
}

// The device of this rank: the GPU of its local rank.
std::string rank_device(const std::string& device, const World& world) {
  const std::string d = resolve_device(device);
  return d == "cpu" ? d : "cuda:" + std::to_string(world.local_rank());
}

}  // namespace

namespace {

// Seconds of one all-reduce of `t` through `comm`: the mean over `iters` launched back to back
// (from one graph where the backend has them), the slowest rank's.
double time_all_reduce(Backend& backend, Communicator& comm, const Tensor& t,
                       const CollectivesOptions& o, World& world) {
  for (int32_t i = 0; i < o.warmup; ++i) comm.all_reduce(t, ReduceOp::kSum);
  backend.synchronize();
  std::unique_ptr<BackendGraph> graph;
  if (backend.supports_graphs()) {
    backend.begin_capture();
    for (int32_t i = 0; i < o.iters; ++i) comm.all_reduce(t, ReduceOp::kSum);
    graph = backend.end_capture();
    backend.replay(*graph);  // the first launch uploads the graph
    backend.synchronize();
  }
  const auto begin = std::chrono::steady_clock::now();
  backend.mark_step_begin();
  if (graph) {
    backend.replay(*graph);
  } else {
    for (int32_t i = 0; i < o.iters; ++i) comm.all_reduce(t, ReduceOp::kSum);
  }
  backend.mark_step_end();
  backend.synchronize();
  const std::optional<Backend::StepTime> device_time = backend.last_step_time();
  const double seconds =
      device_time ? device_time->busy_s
                  : std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const auto ns = static_cast<int64_t>(seconds / o.iters * 1e9);
  return static_cast<double>(-world.min_over_ranks(-ns)) * 1e-9;
}

// The largest error of one all-reduce through `comm` against the sum computed on the host: each
// rank contributes fill_random values of its own seed, rounded to t's dtype.
double check_all_reduce(Backend& backend, Backend& cpu, Communicator& comm, const Tensor& t,
                        World& world) {
  const int64_t n = t.numel();
  backend.fill_random(t, 1000 + world.rank(), 1.0f, 0.0f);
  comm.all_reduce(t, ReduceOp::kSum);
  const Tensor got = Tensor::empty({n}, DType::kF32);
  backend.download_f32(t, got);
  backend.synchronize();
  const Tensor part = Tensor::empty({n}, DType::kF32);
  std::vector<float> want(static_cast<size_t>(n), 0.0f);
  for (int q = 0; q < world.size(); ++q) {
    cpu.fill_random(part, 1000 + q, 1.0f, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const float v = part.data<float>()[i];
      want[static_cast<size_t>(i)] += t.dtype() == DType::kBF16 ? bf16_to_f32(f32_to_bf16(v)) : v;
    }
  }
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double w = want[static_cast<size_t>(i)];
    worst = std::max(worst, std::abs(got.data<float>()[i] - w) / std::max(1.0, std::abs(w)));
  }
  return worst;
}

}  // namespace

CollectivesResult run_collectives_bench(const CollectivesOptions& o) {
  World& world = World::get();
  std::unique_ptr<Backend> backend = make_backend(rank_device(o.device, world));
  const std::shared_ptr<Communicator> comm = world.make_groups(*backend, world.size()).tp;
  // NCCL alone: the same communicator without the one-shot all-reduce.
  std::shared_ptr<Communicator> nccl;
  if (!backend->communicator_id().empty() && world.size() > 1) {
    ::setenv("INFLIGHT_ONE_SHOT_ALL_REDUCE_MAX", "0", 1);
    nccl = world.make_groups(*backend, world.size()).tp;
    ::unsetenv("INFLIGHT_ONE_SHOT_ALL_REDUCE_MAX");
  }
  const std::unique_ptr<Backend> cpu = make_backend("cpu");  // the expected sums
  CollectivesResult r;
  r.ranks = world.size();
  r.backend = std::string(backend->name());
  const DType dtype = backend->compute_dtype();
  r.dtype = dtype_name(dtype);
  r.graphs = backend->supports_graphs();
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
  for (const int64_t bytes : o.sizes.empty() ? default_sizes() : o.sizes) {
    const int64_t n = std::max<int64_t>(bytes / elem, 1);
    const Tensor t = backend->alloc({n}, dtype);
    backend->fill_random(t, 1, 1e-3f, 0.0f);
    CollectiveTiming c;
    c.bytes = n * elem;
    // Right before fast: a sum over ranks within the rounding of one bf16 (or f32) sum.
    const double tolerance = dtype == DType::kBF16 ? 2e-2 : 1e-5;
    for (Communicator* path : {comm.get(), nccl.get()}) {
      if (path == nullptr) continue;
      const double error = check_all_reduce(*backend, *cpu, *path, t, world);
      INFLIGHT_CHECK_CODE(error <= tolerance, ErrorCode::kInternal,
                          "all-reduce of {} bytes on {} ranks{}: relative error {} exceeds {}",
                          c.bytes, r.ranks, path == nccl.get() ? " (NCCL alone)" : "", error,
                          tolerance);
      c.max_relative_error = std::max(c.max_relative_error, error);
    }
    c.latency_us = time_all_reduce(*backend, *comm, t, o, world) * 1e6;
    c.algbw_gb_per_s = static_cast<double>(c.bytes) / (c.latency_us * 1e3);
    c.busbw_gb_per_s = c.algbw_gb_per_s * 2.0 * (r.ranks - 1) / r.ranks;
    if (nccl != nullptr) c.nccl_latency_us = time_all_reduce(*backend, *nccl, t, o, world) * 1e6;
    r.all_reduce.push_back(c);
  }
  return r;
}

void print_collectives_table(std::FILE* out, const CollectivesResult& r) {
  std::fprintf(out, "all-reduce on %d ranks (%s, %s%s)\n", r.ranks, r.backend.c_str(),
               r.dtype.c_str(), r.graphs ? ", launched from a graph" : "");
  std::fprintf(out, "%14s %12s %14s %14s %14s\n", "bytes", "latency us", "algbw GB/s", "busbw GB/s",
               "NCCL alone us");
  for (const CollectiveTiming& c : r.all_reduce) {
    std::fprintf(out, "%14lld %12.2f %14.2f %14.2f %14.2f\n", static_cast<long long>(c.bytes),
                 c.latency_us, c.algbw_gb_per_s, c.busbw_gb_per_s, c.nccl_latency_us);
  }
}

nlohmann::json collectives_result_json(const CollectivesResult& r, const CollectivesOptions& o,
                                       const RunInfo& info) {
  nlohmann::json j;
  j["mode"] = "collectives";
  add_run_info(j, info);
  j["backend"] = r.backend;
  j["dtype"] = r.dtype;
  j["ranks"] = r.ranks;
  j["tensor_parallel_size"] = r.ranks;
  j["iters"] = o.iters;
  j["graphs"] = r.graphs;
  nlohmann::json rows = nlohmann::json::array();
  for (const CollectiveTiming& c : r.all_reduce) {
    rows.push_back({{"bytes", c.bytes},
                    {"latency_us", c.latency_us},
                    {"algbw_gb_per_s", c.algbw_gb_per_s},
                    {"busbw_gb_per_s", c.busbw_gb_per_s},
                    {"nccl_latency_us", c.nccl_latency_us},
                    {"max_relative_error", c.max_relative_error}});
  }
  j["all_reduce"] = rows;
  return j;
}

}  // namespace inflight::bench
