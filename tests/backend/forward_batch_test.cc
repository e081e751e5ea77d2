#include "runtime/forward_batch.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/check.h"

namespace inflight {
namespace {

// The example from forward_batch.h: block_size 4, sequence A computes prompt tokens 0..5 in
// blocks {7, 2}, sequence B decodes position 9 in blocks {0, 5, 3}.
ForwardBatch example() {
  ForwardBatch b;
  b.token_ids = {10, 11, 12, 13, 14, 15, 19};
  b.positions = {0, 1, 2, 3, 4, 5, 9};
  b.slot_mapping = {28, 29, 30, 31, 8, 9, 13};
  b.query_start = {0, 6, 7};
  b.context_lens = {6, 10};
  b.block_tables = {7, 2, -1, 0, 5, 3};
  b.max_blocks_per_seq = 3;
  b.logits_indices = {5, 6};
  return b;
}

void expect_rejected(const std::function<void(ForwardBatch&)>& mutate, const char* what) {
  ForwardBatch b = example();
  mutate(b);
  try {
    b.validate(4, 8);
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << what;
    EXPECT_NE(std::string(e.what()).find("forward batch"), std::string::npos) << e.what();
  }
}

TEST(ForwardBatch, AcceptsTheDocumentedExample) {
  EXPECT_NO_THROW(example().validate(4, 8));
}

TEST(ForwardBatch, RejectsEveryBrokenInvariant) {
  expect_rejected([](ForwardBatch& b) { b = ForwardBatch(); }, "empty batch");
  expect_rejected([](ForwardBatch& b) { b.positions.pop_back(); }, "positions too short");
  expect_rejected([](ForwardBatch& b) { b.slot_mapping.push_back(0); }, "slot_mapping too long");
  expect_rejected([](ForwardBatch& b) { b.query_start = {0, 7}; }, "query_start size");
  expect_rejected([](ForwardBatch& b) { b.query_start = {0, 6, 6}; }, "query_start end");
  expect_rejected([](ForwardBatch& b) { b.query_start = {1, 6, 7}; }, "query_start begin");
  expect_rejected([](ForwardBatch& b) { b.block_tables.pop_back(); }, "block_tables size");
  expect_rejected([](ForwardBatch& b) { b.token_ids[0] = -3; }, "negative token");
  expect_rejected([](ForwardBatch& b) { b.context_lens[0] = 5; }, "context shorter than new");
  expect_rejected([](ForwardBatch& b) { b.context_lens[1] = 13; }, "context needs 4 blocks");
  expect_rejected([](ForwardBatch& b) { b.block_tables[1] = 8; }, "block id >= num_blocks");
  expect_rejected([](ForwardBatch& b) { b.block_tables[3] = -1; }, "block id -1 in use");
  expect_rejected([](ForwardBatch& b) { b.positions[6] = 8; }, "decode position not last");
  expect_rejected([](ForwardBatch& b) { std::swap(b.positions[1], b.positions[2]); },
                  "positions out of order");
  expect_rejected([](ForwardBatch& b) { b.slot_mapping[4] = 10; }, "slot off its block table");
  expect_rejected([](ForwardBatch& b) { b.logits_indices.push_back(7); }, "logits index");
  expect_rejected([](ForwardBatch& b) { b.logits_indices[0] = -1; }, "negative logits index");
}

TEST(ForwardBatch, RejectsTwoSequencesWritingOneSlot) {
  ForwardBatch b;
  b.token_ids = {1, 2};
  b.positions = {0, 0};
  b.slot_mapping = {4, 4};
  b.query_start = {0, 1, 2};
  b.context_lens = {1, 1};
  b.block_tables = {1, 1};   // both tables name block 1 (a shared prefix block is fine to
  b.max_blocks_per_seq = 1;  // read, but not to write twice in one step)
  try {
    b.validate(4, 2);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("slot 4"), std::string::npos) << e.what();
  }
}

TEST(ForwardBatch, RejectsBadCacheGeometry) {
  EXPECT_THROW(example().validate(0, 8), Error);
  EXPECT_THROW(example().validate(4, 0), Error);
}

}  // namespace
}  // namespace inflight
