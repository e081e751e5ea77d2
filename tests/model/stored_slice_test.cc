// Slices of stored tensors (formats/stored_slice.h): each slice converts to exactly the rows or
// columns of the whole tensor's conversion, in every format a tensor-parallel rank loads from
// (f32, bf16, GGUF blocks, llama.cpp's interleaved q/k heads, FP8 with per-tensor, per-row and
// block scales), and a cut that a format cannot make is refused with a message naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/fp8.h"
#include "formats/stored_slice.h"

namespace inflight {
namespace {

// Bytes that a StoredTensor views, kept alive with it.
StoredTensor stored(std::string name, Shape shape, StoredType type, std::vector<uint8_t> bytes) {
  auto owner = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  StoredTensor t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.type = type;
  t.data = owner->data();
  t.owner = owner;
  return t;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// slice converts to the [rows, cols] block of `whole` at (r0, c0), bit for bit.
void expect_block(const StoredTensor& whole, const StoredTensor& slice, int64_t r0, int64_t c0) {
  const Tensor w = to_host_f32(whole), s = to_host_f32(slice);
  const int64_t rows = slice.rows(), cols = slice.cols(), wc = whole.cols();
  ASSERT_EQ(s.numel(), rows * cols) << slice.name;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(s.data<float>()[r * cols + c], w.data<float>()[(r0 + r) * wc + c0 + c])
          << slice.name << " at " << r << "," << c;
    }
  }
}

void expect_refused(const std::function<void()>& f, ErrorCode code, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.message();
    EXPECT_NE(e.message().find(needle), std::string::npos) << e.message();
  }
}

TEST(StoredSlice, FloatRowsColumnsAndBoth) {
  const StoredTensor t = stored("w", {6, 10}, StoredType::kF32, f32_bytes(random_values(60, 1)));
  expect_block(t, slice_rows(t, 2, 5), 2, 0);
  expect_block(t, slice_cols(t, 3, 8), 0, 3);
  const StoredTensor cols = slice_cols(t, 4, 10);
  EXPECT_FALSE(cols.is_plain(DType::kF32)) << "a column window is not contiguous";
  expect_block(t, slice_rows(cols, 1, 6), 1, 4);
  // bf16, and a vector (a bias): its elements.
  std::vector<uint8_t> bf16(60 * 2);
  const std::vector<float> v = random_values(60, 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = f32_to_bf16(v[i]);
    std::memcpy(bf16.data() + 2 * i, &h, 2);
  }
  const StoredTensor b = stored("b", {6, 10}, StoredType::kBF16, bf16);
  expect_block(b, slice_cols(b, 5, 7), 0, 5);
  const StoredTensor bias = stored("bias", {60}, StoredType::kBF16, bf16);
  const StoredTensor part = slice_rows(bias, 20, 44);
  EXPECT_EQ(part.shape, (Shape{24}));
  expect_block(bias, part, 0, 20);
}

TEST(StoredSlice, GgufBlocksAreCutOnBlockBoundaries) {
  // q8_0: 32 elements per block, an f16 scale and 32 int8 values (34 bytes).
  constexpr int64_t kRows = 3, kCols = 96, kBlocks = kCols / 32;
  std::mt19937 rng(3);
  std::vector<uint8_t> bytes;
  for (int64_t b = 0; b < kRows * kBlocks; ++b) {
    const uint16_t scale = f32_to_f16(0.01f * static_cast<float>(1 + b));
    bytes.push_back(static_cast<uint8_t>(scale & 0xff));
    bytes.push_back(static_cast<uint8_t>(scale >> 8));
    for (int i = 0; i < 32; ++i) bytes.push_back(static_cast<uint8_t>(rng()));
  }
  StoredTensor t = stored("q8", {kRows, kCols}, StoredType::kGgml, bytes);
  t.ggml_type = GgmlType::kQ8_0;
  expect_block(t, slice_cols(t, 32, 96), 0, 32);
  expect_block(t, slice_rows(slice_cols(t, 0, 64), 1, 3), 1, 0);
  expect_refused([&] { slice_cols(t, 16, 48); }, ErrorCode::kUnsupported, "blocks of 32");
}

TEST(StoredSlice, InterleavedHeadsAreCutOnHeadBoundaries) {
  // llama.cpp's q rows: 3 heads of 4 rows, each head's rows interleaved for its RoPE.
  StoredTensor t = stored("q", {12, 5}, StoredType::kF32, f32_bytes(random_values(60, 4)));
  t.interleaved_heads = 3;
  const StoredTensor heads = slice_rows(t, 4, 12);
  EXPECT_EQ(heads.interleaved_heads, 2);
  expect_block(t, heads, 4, 0);
  expect_refused([&] { slice_rows(t, 2, 6); }, ErrorCode::kUnsupported, "cut a head of 4 rows");
}

// An e4m3 tensor [4, 8] with the given scale tensor.
StoredTensor fp8(std::shared_ptr<const StoredTensor> scale, int64_t block_rows,
                 int64_t block_cols) {
  std::vector<uint8_t> bytes;
  for (const float f : random_values(32, 5)) bytes.push_back(f32_to_e4m3(f * 100.0f));
  StoredTensor t = stored("w8", {4, 8}, StoredType::kF8E4M3, bytes);
  t.scale = std::move(scale);
  t.block_rows = block_rows;
  t.block_cols = block_cols;
  return t;
}

TEST(StoredSlice, Fp8ScalesFollowTheSlice) {
  auto scales = [](Shape shape, uint32_t seed) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    std::vector<float> v = random_values(n, seed);
    for (float& x : v) x = 0.01f + std::abs(x);
    return std::make_shared<const StoredTensor>(
        stored("w8.scale", std::move(shape), StoredType::kF32, f32_bytes(v)));
  };
  const StoredTensor tensor = fp8(scales({1}, 6), 0, 0);
  expect_block(tensor, slice_cols(tensor, 2, 6), 0, 2);
  const StoredTensor rows = fp8(scales({4}, 7), 0, 0);
  expect_block(rows, slice_rows(rows, 1, 3), 1, 0);
  expect_block(rows, slice_cols(rows, 4, 8), 0, 4);
  const StoredTensor blocks = fp8(scales({2, 2}, 8), 2, 4);  // 2 x 4 blocks
  expect_block(blocks, slice_rows(blocks, 2, 4), 2, 0);
  expect_block(blocks, slice_cols(blocks, 4, 8), 0, 4);
  expect_block(blocks, slice_rows(slice_cols(blocks, 4, 8), 2, 4), 2, 4);
  expect_refused([&] { slice_cols(blocks, 2, 6); }, ErrorCode::kUnsupported, "cuts a block");
  expect_refused([&] { slice_rows(blocks, 1, 3); }, ErrorCode::kUnsupported, "cuts a block");
}

TEST(StoredSlice, RangesOutsideTheTensorAreRefused) {
  const StoredTensor t = stored("w", {6, 10}, StoredType::kF32, f32_bytes(random_values(60, 9)));
  expect_refused([&] { slice_rows(t, 4, 7); }, ErrorCode::kInvalidArgument, "rows [4, 7)");
  expect_refused([&] { slice_cols(t, 3, 3); }, ErrorCode::kInvalidArgument, "columns [3, 3)");
  const StoredTensor cube =
      stored("c", {2, 3, 10}, StoredType::kF32, f32_bytes(random_values(60, 9)));
  expect_refused([&] { slice_cols(cube, 0, 5); }, ErrorCode::kUnsupported, "3-D");
}

}  // namespace
}  // namespace inflight
