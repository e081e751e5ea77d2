#include "ops/gather_rows.h"

#include "ops/op_test_util.h"

namespace inflight {
namespace {

using testing::error_code_of;
using testing::expect_close;
using testing::i32_tensor;
using testing::poison;
using testing::random_tensor;

TEST(GatherRowsCpu, CopiesIndexedRowsIncludingRepeats) {
  std::mt19937 rng(29);
  for (int64_t src_rows : {1, 7, 769}) {
    for (int64_t cols : {1, 3, 576}) {
      for (int64_t n : {1, 3, 91}) {
        const Tensor src = random_tensor({src_rows, cols}, rng);
        std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(src_rows - 1));
        std::vector<int32_t> idx(static_cast<size_t>(n));
        for (auto& i : idx) i = pick(rng);
        idx.front() = static_cast<int32_t>(src_rows - 1);  // the last row, and a repeat
        if (n > 1) idx.back() = idx.front();
        std::vector<double> expect;
        for (int32_t i : idx) {
          for (int64_t c = 0; c < cols; ++c) expect.push_back(src.data<float>()[i * cols + c]);
        }
        const Tensor dst = Tensor::empty({n, cols}, DType::kF32);
        poison(dst);
        gather_rows_cpu(make_gather_rows_params(src, i32_tensor(idx), dst));
        expect_close(dst, expect, 0.0, "gather_rows");
      }
    }
  }
}

// A shard of a table (rows [first, first + R) of it): other indices gather zeros, so the shards'
// outputs add up to the whole table's lookup.
TEST(GatherRowsCpu, ShardsOfATableAddUpToTheWholeLookup) {
  std::mt19937 rng(31);
  constexpr int64_t kRows = 12, kCols = 5, kShards = 3, kPer = kRows / kShards;
  const Tensor table = random_tensor({kRows, kCols}, rng);
  const std::vector<int32_t> idx = {0, 11, 4, 4, 7, 3, 8};
  const auto n = static_cast<int64_t>(idx.size());
  std::vector<double> sum(static_cast<size_t>(n * kCols), 0.0), whole;
  for (const int32_t i : idx) {
    for (int64_t c = 0; c < kCols; ++c) whole.push_back(table.data<float>()[i * kCols + c]);
  }
  for (int64_t s = 0; s < kShards; ++s) {
    const Tensor shard = table.rows(s * kPer, (s + 1) * kPer);
    const Tensor dst = Tensor::empty({n, kCols}, DType::kF32);
    poison(dst);
    gather_rows_cpu(make_gather_rows_params(shard, i32_tensor(idx), dst, s * kPer));
    for (int64_t i = 0; i < n * kCols; ++i) {
      const bool mine = idx[static_cast<size_t>(i / kCols)] / kPer == s;
      if (!mine) EXPECT_EQ(dst.data<float>()[i], 0.0f) << "shard " << s << " element " << i;
      sum[static_cast<size_t>(i)] += dst.data<float>()[i];
    }
  }
  EXPECT_EQ(sum, whole);
}

TEST(GatherRowsCpu, EmptyIndexListWritesNothing) {
  std::mt19937 rng(1);
  const Tensor src = random_tensor({4, 5}, rng);
  const Tensor dst = Tensor::empty({0, 5}, DType::kF32);
  EXPECT_NO_THROW(gather_rows_cpu(make_gather_rows_params(src, i32_tensor({}), dst)));
}

TEST(GatherRowsParams, RejectsWrongIndexTypeAndShape) {
  std::mt19937 rng(1);
  const Tensor src = random_tensor({4, 5}, rng);
  const Tensor dst = Tensor::empty({2, 5}, DType::kF32);
  const Tensor i64 = Tensor::zeros({2}, DType::kI64);
  EXPECT_EQ(error_code_of([&] { make_gather_rows_params(src, i64, dst); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] {
              make_gather_rows_params(src, i32_tensor({0, 1, 2}), dst);
            }),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace inflight
