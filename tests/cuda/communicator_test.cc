// The CUDA backend's communicator (NCCL) with one rank: every collective runs, and runs inside a
// captured graph, as a decode step's all-reduces do under tensor parallelism; a model given it
// runs its decode steps as captured graphs with the all-reduces inside, and gives the logits of
// the model without one bit for bit. The collectives between several GPUs are tested by the
// multi-GPU runs (dev/cuda/device_run.sh parallel).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/tiny_llama.h"
#include "cuda_test_util.h"
#include "model/registry.h"
#include "runtime/communicator.h"

namespace inflight::test {
namespace {

using testing::make_step;
using testing::RandomBlocks;
using testing::SeqState;

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

// A tiny Llama over an NCCL communicator of one rank (the all-reduces after o and down, through
// NCCL, inside the captured decode graphs) against the same model without a communicator:
// the same logits, bit for bit, prefill and decode steps of several batch sizes.
TEST(CudaServingTest, NcclWithOneRankRunsInsideCapturedDecodeGraphs) {
  INFLIGHT_REQUIRE_CUDA();
  ModelConfig c = testing::tiny_config("llama");
  c.vocab_size = 512;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_layers = 2;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  const auto weights = testing::random_weights(c, 11);
  const WeightSource source = weights_of(weights);
  const std::shared_ptr<Backend> gpu = make_cuda_backend(0);
  std::shared_ptr<Communicator> comm = gpu->make_communicator(0, 1, gpu->communicator_id());
  auto alone = make_runner(gpu, c, &source, 0, {GraphMode::kCapture});
  auto with_comm = make_runner(gpu, c, &source, 0, {GraphMode::kCapture}, comm);
  constexpr int32_t kBlock = 16;
  for (DeviceRunner* r : {alone.get(), with_comm.get()}) {
    r->reserve_workspace(256, 16);
    r->init_kv_cache(64, kBlock);
  }
  std::vector<SeqState> seqs(5);
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].tokens = testing::random_tokens(4 + 7 * static_cast<int64_t>(i), c.vocab_size,
                                            static_cast<uint32_t>(i));
  }
  RandomBlocks pool(64, 3);
  // The step through both runners, every row whole: identical logits; each sequence goes on
  // with the best token of its last row.
  const auto step = [&](const std::vector<std::pair<SeqState*, int32_t>>& work) {
    const ForwardBatch b = make_step(work, kBlock, pool);
    const auto rows = static_cast<int32_t>(b.logits_indices.size());
    LogitsRequest request;
    for (int32_t r = 0; r < rows; ++r) request.full_rows.push_back(r);
    const auto logits = [&](DeviceRunner& runner) {
      runner.begin_step(b, request);
      const StepLogits& out = runner.end_step();
      EXPECT_EQ(out.full.numel(), int64_t{rows} * c.vocab_size);
      const float* v = out.full.data<float>();
      return std::vector<float>(v, v + out.full.numel());
    };
    const std::vector<float> want = logits(*alone), got = logits(*with_comm);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
    for (size_t i = 0; i < work.size(); ++i) {  // a row per token: the sequence's last
      const auto row = want.begin() + int64_t{b.query_start[i + 1] - 1} * c.vocab_size;
      const auto best = std::max_element(row, row + c.vocab_size) - row;
      work[i].first->tokens.push_back(static_cast<int32_t>(best));
    }
  };
  std::vector<std::pair<SeqState*, int32_t>> prefill;
  for (SeqState& s : seqs) prefill.emplace_back(&s, static_cast<int32_t>(s.tokens.size()));
  step(prefill);
  for (const int batch : {5, 3, 1, 5, 2, 4}) {
    std::vector<std::pair<SeqState*, int32_t>> work;
    for (int i = 0; i < batch; ++i) work.emplace_back(&seqs[static_cast<size_t>(i)], 1);
    step(work);
  }
  EXPECT_GE(with_comm->graphs().size(), 3u) << "decode steps of 1, 2, 4 and 8 rows were captured";
}

}  // namespace
}  // namespace inflight::test
