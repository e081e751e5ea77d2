#include "cuda_test_util.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "backend/cpu/cpu_backend.h"

namespace inflight::test {

namespace {

struct OpSummary {
  int64_t cases = 0;
  int64_t failed = 0;
  double worst_rel_l2 = 0.0;
  double worst_rel_max = 0.0;
  int64_t non_finite = 0;
  std::string worst_case;
};

std::mutex& summary_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, OpSummary>& summary() {
  static std::map<std::string, OpSummary> s;
  return s;
}

// Prints one row per op after all tests ran: the device runs read this table.
class SummaryEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    std::lock_guard<std::mutex> lock(summary_mutex());
    if (summary().empty()) return;
    std::string device = "none";
    if (cuda_device_available()) device = cuda_device_description(0);
    std::printf("\n== CUDA vs CPU summary (device: %s) ==\n", device.c_str());
    std::printf("%-22s %6s %6s %12s %12s %10s  %s\n", "op", "cases", "failed", "worst rel_l2",
                "worst rel_max", "non-finite", "worst case");
    for (const auto& [op, s] : summary()) {
      std::printf("%-22s %6lld %6lld %12.3e %12.3e %10lld  %s\n", op.c_str(),
                  static_cast<long long>(s.cases), static_cast<long long>(s.failed), s.worst_rel_l2,
                  s.worst_rel_max, static_cast<long long>(s.non_finite), s.worst_case.c_str());
    }
    std::fflush(stdout);
  }
};

[[maybe_unused]] const auto* const kSummaryEnvironment =
    ::testing::AddGlobalTestEnvironment(new SummaryEnvironment);

}  // namespace

Backend& cuda_backend() {
  static std::unique_ptr<Backend> backend = make_cuda_backend(0);
  return *backend;
}

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

Tensor random_host(const Shape& shape, std::mt19937& rng, float lo, float hi) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = bf16_to_f32(f32_to_bf16(dist(rng)));
  return t;
}

Tensor to_backend(Backend& backend, const Tensor& host_f32) {
  return backend.upload(host_f32, backend.compute_dtype());
}

Tensor to_host(Backend& backend, const Tensor& t) {
  Tensor host = Tensor::empty(t.shape(), DType::kF32);
  backend.download_f32(t, host);
  backend.synchronize();
  return host;
}

void poison(const Tensor& cuda_tensor) {
  ASSERT_TRUE(cuda_tensor.device().is_cuda());
  // The backend's stream does not order against the legacy stream: drain both around it.
  cuda_backend().synchronize();
  ASSERT_EQ(cudaMemset(cuda_tensor.raw(), 0xFF, cuda_tensor.nbytes()), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

std::string ErrorStats::str() const {
  return fmt::format("rel_l2 {:.3e} rel_max {:.3e} max_abs {:.3e} non-finite {} of {}", rel_l2,
                     rel_max, max_abs, non_finite, count);
}

ErrorStats compare(const Tensor& got, const Tensor& ref) {
  EXPECT_EQ(got.shape(), ref.shape());
  ErrorStats s;
  s.count = ref.numel();
  if (got.shape() != ref.shape()) {
    s.non_finite = s.count;
    return s;
  }
  const float* g = got.data<float>();
  const float* r = ref.data<float>();
  double diff_sq = 0.0, ref_sq = 0.0, ref_max = 0.0;
  for (int64_t i = 0; i < s.count; ++i) {
    if (!std::isfinite(r[i])) continue;  // reference NaN marks a "don't care" slot
    if (!std::isfinite(g[i])) {
      ++s.non_finite;
      continue;
    }
    const double d = std::fabs(static_cast<double>(g[i]) - r[i]);
    diff_sq += d * d;
    ref_sq += static_cast<double>(r[i]) * r[i];
    ref_max = std::max(ref_max, std::fabs(static_cast<double>(r[i])));
    s.max_abs = std::max(s.max_abs, d);
  }
  s.rel_l2 = ref_sq > 0.0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  s.rel_max = ref_max > 0.0 ? s.max_abs / ref_max : s.max_abs;
  return s;
}

void record(const std::string& op, const std::string& what, const ErrorStats& stats, bool ok) {
  std::lock_guard<std::mutex> lock(summary_mutex());
  OpSummary& s = summary()[op];
  ++s.cases;
  s.failed += ok ? 0 : 1;
  s.non_finite += stats.non_finite;
  if (stats.rel_max >= s.worst_rel_max) s.worst_case = what;
  s.worst_rel_l2 = std::max(s.worst_rel_l2, stats.rel_l2);
  s.worst_rel_max = std::max(s.worst_rel_max, stats.rel_max);
}

ErrorStats expect_close(const std::string& op, const std::string& what, const Tensor& got,
                        const Tensor& ref, double tolerance) {
  const ErrorStats s = compare(got, ref);
  const bool ok = s.non_finite == 0 && s.rel_l2 < tolerance && s.rel_max < tolerance;
  record(op, what, s, ok);
  EXPECT_TRUE(ok) << op << " " << what << ": " << s.str();
  return s;
}

}  // namespace inflight::test
