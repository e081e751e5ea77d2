#include "core/tensor.h"

#include <gtest/gtest.h>

namespace inflight {
namespace {

TEST(Tensor, ShapesViewsAndSlices) {
  Tensor t = Tensor::zeros({4, 3}, DType::kF32);
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.size(-1), 3);
  for (int i = 0; i < 12; ++i) t.data<float>()[i] = static_cast<float>(i);
  Tensor r = t.rows(1, 3);
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(r.data<float>()[0], 3.0f);
  Tensor v = t.reshape({12});
  EXPECT_EQ(v.data<float>()[11], 11.0f);
  EXPECT_THROW(t.reshape({5}), Error);
  EXPECT_THROW(t.rows(2, 5), Error);
  EXPECT_FALSE(Tensor().defined());
}

TEST(Tensor, ViewKeepsStorageAlive) {
  Tensor view;
  {
    Tensor t = Tensor::zeros({8}, DType::kI32);
    t.data<int32_t>()[7] = 42;
    view = t.rows(4, 8);
  }
  EXPECT_EQ(view.data<int32_t>()[3], 42);
}

}  // namespace
}  // namespace inflight
