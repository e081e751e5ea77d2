#include "bench/collectives_bench.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "backend/backend_factory.h"
#include "core/check.h"
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

CollectivesResult run_collectives_bench(const CollectivesOptions& o) {
  World& world = World::get();
  std::unique_ptr<Backend> backend = make_backend(rank_device(o.device, world));
  const std::shared_ptr<Communicator> comm = world.make_communicator(*backend);
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
    for (int32_t i = 0; i < o.warmup; ++i) comm->all_reduce(t, ReduceOp::kSum);
    backend->synchronize();
    std::unique_ptr<BackendGraph> graph;
    if (r.graphs) {
      backend->begin_capture();
      for (int32_t i = 0; i < o.iters; ++i) comm->all_reduce(t, ReduceOp::kSum);
      graph = backend->end_capture();
      backend->replay(*graph);  // the graph's first launch uploads it
      backend->synchronize();
    }
    const auto begin = std::chrono::steady_clock::now();
    backend->mark_step_begin();
    if (graph) {
      backend->replay(*graph);
    } else {
      for (int32_t i = 0; i < o.iters; ++i) comm->all_reduce(t, ReduceOp::kSum);
    }
    backend->mark_step_end();
    backend->synchronize();
    const std::optional<Backend::StepTime> device_time = backend->last_step_time();
    const double seconds =
        device_time ? device_time->busy_s
                    : std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    // The slowest rank's time (each rank's in microseconds, as an integer of nanoseconds).
    const int64_t ns = static_cast<int64_t>(seconds / o.iters * 1e9);
    const int64_t slowest = -world.min_over_ranks(-ns);
    CollectiveTiming c;
    c.bytes = n * elem;
    c.latency_us = static_cast<double>(slowest) / 1e3;
    c.algbw_gb_per_s = static_cast<double>(c.bytes) / (c.latency_us * 1e3);
    c.busbw_gb_per_s = c.algbw_gb_per_s * 2.0 * (r.ranks - 1) / r.ranks;
    r.all_reduce.push_back(c);
  }
  return r;
}

void print_collectives_table(std::FILE* out, const CollectivesResult& r) {
  std::fprintf(out, "all-reduce on %d ranks (%s, %s%s)\n", r.ranks, r.backend.c_str(),
               r.dtype.c_str(), r.graphs ? ", launched from a graph" : "");
  std::fprintf(out, "%14s %12s %14s %14s\n", "bytes", "latency us", "algbw GB/s", "busbw GB/s");
  for (const CollectiveTiming& c : r.all_reduce) {
    std::fprintf(out, "%14lld %12.2f %14.2f %14.2f\n", static_cast<long long>(c.bytes),
                 c.latency_us, c.algbw_gb_per_s, c.busbw_gb_per_s);
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
                    {"busbw_gb_per_s", c.busbw_gb_per_s}});
  }
  j["all_reduce"] = rows;
  return j;
}

}  // namespace inflight::bench
