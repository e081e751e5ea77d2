#include <gtest/gtest.h>

#include "core/check.h"
#include "eval/eval_mode.h"

namespace inflight::eval {
namespace {

TEST(EvalMode, ParsesWeightsAndKvCache) {
  EvalMode m = parse_eval_mode("fp8-block");
  EXPECT_EQ(m.name, "fp8-block");
  EXPECT_EQ(m.quantization, "fp8-block");
  EXPECT_EQ(m.kv_cache_dtype, "auto");
  EXPECT_FALSE(m.is_reference());

  m = parse_eval_mode("fp8-channel+kv-fp8");
  EXPECT_EQ(m.name, "fp8-channel+kv-fp8");
  EXPECT_EQ(m.quantization, "fp8-channel");
  EXPECT_EQ(m.kv_cache_dtype, "fp8");

  m = parse_eval_mode("fp8");  // --quantization's name of the default scheme
  EXPECT_EQ(m.name, "fp8-channel");

  m = parse_eval_mode("base");
  EXPECT_TRUE(m.is_reference());
  EXPECT_EQ(m.quantization, "");

  m = parse_eval_mode("kv-fp8");  // the KV cache alone
  EXPECT_EQ(m.name, "base+kv-fp8");
  EXPECT_EQ(m.quantization, "");
  EXPECT_FALSE(m.is_reference());

  m = parse_eval_mode("fp8-tensor+kv-auto");  // the default KV cache is not named
  EXPECT_EQ(m.name, "fp8-tensor");
}

TEST(EvalMode, RefusesUnknownParts) {
  for (const char* bad : {"fp8-row", "int4", "fp8-block+kv-int8", "fp8-block+", "", "+kv-fp8"}) {
    EXPECT_THROW(parse_eval_mode(bad), Error) << bad;
  }
}

TEST(EvalMode, ParsesLists) {
  const std::vector<EvalMode> modes = parse_eval_modes("base, fp8-tensor,fp8-block+kv-fp8");
  ASSERT_EQ(modes.size(), 3u);
  EXPECT_EQ(modes[0].name, "base");
  EXPECT_EQ(modes[1].name, "fp8-tensor");
  EXPECT_EQ(modes[2].name, "fp8-block+kv-fp8");
  EXPECT_THROW(parse_eval_modes(""), Error);
  EXPECT_THROW(parse_eval_modes("fp8-tensor,,fp8-block"), Error);
  EXPECT_THROW(parse_eval_modes("fp8,fp8-channel"), Error);  // the same mode twice
}

}  // namespace
}  // namespace inflight::eval
