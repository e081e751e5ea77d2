// Helpers for the op tests: random inputs, poisoned outputs, and comparison against a scalar
// reference with a tolerance scaled by the reference's magnitude (GUIDE section 3).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace inflight::testing {

// fp32 kernels against a double-precision reference.
constexpr double kF32RelTol = 1e-5;

// A host f32 tensor of uniform values in [-scale, scale] (never all zeros).
inline Tensor random_tensor(const Shape& shape, std::mt19937& rng, float scale = 1.0f) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  std::uniform_real_distribution<float> dist(-scale, scale);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

// Fills a float tensor with NaN so that elements a kernel fails to write show up.
inline void poison(const Tensor& t) {
  std::fill_n(t.data<float>(), t.numel(), std::numeric_limits<float>::quiet_NaN());
}

inline int64_t count_nan(const float* p, int64_t n) {
  return std::count_if(p, p + n, [](float v) { return std::isnan(v); });
}

// Max |actual - expected| over max |expected| (floored at 1e-30), and no NaN anywhere.
inline void expect_close(const float* actual, const double* expected, int64_t n, double rel_tol,
                         const std::string& what) {
  ASSERT_EQ(count_nan(actual, n), 0) << what << ": NaN in output (unwritten or overflowed)";
  double max_ref = 0.0, max_err = 0.0;
  int64_t worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_ref = std::max(max_ref, std::abs(expected[i]));
    const double err = std::abs(static_cast<double>(actual[i]) - expected[i]);
    if (err > max_err) {
      max_err = err;
      worst = i;
    }
  }
  const double rel = max_err / std::max(max_ref, 1e-30);
  EXPECT_LE(rel, rel_tol) << what << ": worst element " << worst << " got " << actual[worst]
                          << " expected " << expected[worst] << " (max |ref| " << max_ref << ")";
}

inline void expect_close(const Tensor& actual, const std::vector<double>& expected, double rel_tol,
                         const std::string& what) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size())) << what;
  expect_close(actual.data<float>(), expected.data(), actual.numel(), rel_tol, what);
}

// The ErrorCode that fn() throws, or kInternal when it does not throw an inflight::Error.
template <typename Fn>
ErrorCode error_code_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "expected an inflight::Error";
  return ErrorCode::kInternal;
}

// Host i32 / i64 tensors from vectors.
inline Tensor i32_tensor(const std::vector<int32_t>& v, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  Tensor t = Tensor::empty(shape, DType::kI32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

inline Tensor i64_tensor(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::kI64);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

}  // namespace inflight::testing
