// The CUDA backend's communicator (NCCL) with one rank: every collective runs, and runs inside a
// captured graph, as a decode step's all-reduces do under tensor parallelism. The collectives
// between several GPUs are tested by the multi-GPU runs (dev/cuda/device_run.sh parallel).
#include <gtest/gtest.h>

#include <cstring>

#include "cuda_test_util.h"
#include "runtime/communicator.h"

namespace inflight::test {
namespace {

TEST(CudaServingTest, NcclWithOneRankRunsInsideACapturedGraph) {
  INFLIGHT_REQUIRE_CUDA();
  auto gpu = make_cuda_backend(0);
  std::unique_ptr<Communicator> comm = gpu->make_communicator(0, 1, gpu->communicator_id());
  ASSERT_EQ(comm->world_size(), 1);
  const int64_t n = 4096;
  const Tensor host = Tensor::empty({n}, DType::kF32);
  cpu_backend().fill_random(host, 3, 1.0f, 0.0f);
  const Tensor x = gpu->alloc({n}, DType::kBF16), gathered = gpu->alloc({n}, DType::kBF16);
  const Tensor scattered = gpu->alloc({n}, DType::kBF16);
  // Recorded once: fill, all-reduce (a sum over one rank), all-gather, reduce-scatter, broadcast.
  gpu->begin_capture();
  gpu->fill_random(x, 3, 1.0f, 0.0f);
  comm->all_reduce(x, ReduceOp::kSum);
  comm->all_gather(x, gathered);
  comm->reduce_scatter(gathered, scattered);
  comm->broadcast(scattered, 0);
  std::unique_ptr<BackendGraph> graph = gpu->end_capture();
  for (int replay = 0; replay < 3; ++replay) {
    poison(gathered);
    poison(scattered);
    gpu->replay(*graph);
    const Tensor want = to_host(*gpu, x);
    EXPECT_EQ(std::memcmp(to_host(*gpu, gathered).raw(), want.raw(), want.nbytes()), 0);
    EXPECT_EQ(std::memcmp(to_host(*gpu, scattered).raw(), want.raw(), want.nbytes()), 0);
  }
  const Tensor rounded = to_host(*gpu, gpu->upload(host, DType::kBF16));
  EXPECT_EQ(std::memcmp(to_host(*gpu, x).raw(), rounded.raw(), rounded.nbytes()), 0)
      << "a sum over one rank is the value itself";
}

}  // namespace
}  // namespace inflight::test
