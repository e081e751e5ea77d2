// The CUDA backend's streams: work on two streams ordered by join_stream, and the refusals.
#include <gtest/gtest.h>

#include <cstring>

#include "cuda_test_util.h"

namespace inflight::test {
namespace {

// Two streams of one backend: a large fill on stream 1, then on stream 0 (after join_stream) a
// copy of it and a fill of its own; the copy must see the whole fill, and both values must be the
// CPU's. Switching streams is refused while capturing.
TEST(CudaServingTest, StreamsJoinInOrder) {
  INFLIGHT_REQUIRE_CUDA();
  CudaBackendOptions options;
  options.num_streams = 2;
  auto gpu = make_cuda_backend(0, options);
  ASSERT_EQ(gpu->num_streams(), 2);
  const int64_t n = int64_t{1} << 24;
  const Tensor host = Tensor::empty({n}, DType::kF32);
  cpu_backend().fill_random(host, 7, 1.0f, 0.0f);
  const Tensor a = gpu->alloc({n}, DType::kF32), b = gpu->alloc({n}, DType::kF32);
  poison(a);
  poison(b);
  gpu->synchronize();
  gpu->set_stream(1);
  gpu->fill_random(a, 7, 1.0f, 0.0f);
  gpu->join_stream(0, 1);
  gpu->set_stream(0);
  gpu->copy(a, b);
  const Tensor got = to_host(*gpu, b);
  EXPECT_EQ(std::memcmp(got.raw(), host.raw(), host.nbytes()), 0);
  EXPECT_THROW(gpu->set_stream(2), Error);
  gpu->begin_capture();
  EXPECT_THROW(gpu->set_stream(1), Error);
  gpu->abort_capture();
  EXPECT_THROW(gpu->join_stream(0, 2), Error);
}

}  // namespace
}  // namespace inflight::test
