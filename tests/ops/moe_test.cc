// The mixture-of-experts ops on the CPU against scalar double references: the router (softmax,
// top-k with ties to the lower id, renormalisation) and the experts (each token's chosen
// experts' SwiGLU MLPs, weighted and summed), with experts that get no tokens.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/fp8.h"
#include "ops/moe_experts.h"
#include "ops/moe_route.h"
#include "ops/op_test_util.h"

namespace inflight {
namespace {

using testing::error_code_of;
using testing::expect_close;
using testing::kF32RelTol;
using testing::poison;
using testing::random_tensor;

// The experts' stacked weight as the model keeps it (runtime/linear.h), unquantized.
Linear stacked(const Tensor& w) {
  Linear l;
  l.weight = w;
  return l;
}

struct Routing {
  Tensor ids;      // [T, k] i32
  Tensor weights;  // [T, k] f32
};

Routing route(const Tensor& logits, int32_t k, bool renormalize) {
  const int64_t tokens = logits.size(0);
  Routing r{Tensor::empty({tokens, k}, DType::kI32), Tensor::empty({tokens, k}, DType::kF32)};
  std::fill_n(r.ids.data<int32_t>(), r.ids.numel(), -7);
  poison(r.weights);
  moe_route_cpu(make_moe_route_params(logits, k, renormalize, r.ids, r.weights));
  return r;
}

// The reference router of one token: experts sorted by (logit descending, id ascending), the
// softmax probabilities of the first k, renormalised when asked.
void expect_routed(const float* logits, int64_t experts, int32_t k, bool renormalize,
                   const int32_t* ids, const float* weights, const std::string& what) {
  std::vector<int32_t> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const double max_logit = logits[order[0]];
  double sum = 0.0, chosen = 0.0;
  for (int64_t e = 0; e < experts; ++e) sum += std::exp(double{logits[e]} - max_logit);
  for (int32_t j = 0; j < k; ++j) chosen += std::exp(double{logits[order[j]]} - max_logit) / sum;
  std::vector<double> expect(static_cast<size_t>(k));
  for (int32_t j = 0; j < k; ++j) {
    ASSERT_EQ(ids[j], order[static_cast<size_t>(j)]) << what << ": choice " << j;
    expect[static_cast<size_t>(j)] =
        std::exp(double{logits[order[j]]} - max_logit) / sum / (renormalize ? chosen : 1.0);
  }
  expect_close(weights, expect.data(), k, kF32RelTol, what);
}

TEST(MoeRouteCpu, TopKOfTheSoftmax) {
  std::mt19937 rng(41);
  for (int64_t tokens : {1, 3, 7, 91}) {
    for (int64_t experts : {1, 5, 8, 128, 1024}) {
      for (int32_t k : {1, 2, 3, 8}) {
        if (k > experts) continue;
        for (bool renormalize : {true, false}) {
          const Tensor logits = random_tensor({tokens, experts}, rng, 4.0f);
          const Routing r = route(logits, k, renormalize);
          for (int64_t t = 0; t < tokens; ++t) {
            expect_routed(logits.data<float>() + t * experts, experts, k, renormalize,
                          r.ids.data<int32_t>() + t * k, r.weights.data<float>() + t * k,
                          fmt::format("T={} E={} k={} renorm={} token {}", tokens, experts, k,
                                      renormalize, t));
          }
        }
      }
    }
  }
}

TEST(MoeRouteCpu, TiesGoToTheLowerExpertAndRenormalisedWeightsSumToOne) {
  // Logits from {0, 1, 2}: many ties at every rank.
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> level(0, 2);
  const int64_t tokens = 50, experts = 9;
  const int32_t k = 4;
  Tensor logits = Tensor::empty({tokens, experts}, DType::kF32);
  for (int64_t i = 0; i < logits.numel(); ++i) logits.data<float>()[i] = float(level(rng));
  const Routing r = route(logits, k, /*renormalize=*/true);
  for (int64_t t = 0; t < tokens; ++t) {
    const int32_t* ids = r.ids.data<int32_t>() + t * k;
    expect_routed(logits.data<float>() + t * experts, experts, k, true, ids,
                  r.weights.data<float>() + t * k, fmt::format("ties, token {}", t));
    double sum = 0.0;
    for (int32_t j = 0; j < k; ++j) sum += r.weights.data<float>()[t * k + j];
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  // All equal: experts 0..k-1, each 1/k.
  Tensor flat = Tensor::empty({1, experts}, DType::kF32);
  std::fill_n(flat.data<float>(), experts, 0.5f);
  const Routing f = route(flat, k, true);
  for (int32_t j = 0; j < k; ++j) {
    EXPECT_EQ(f.ids.data<int32_t>()[j], j);
    EXPECT_FLOAT_EQ(f.weights.data<float>()[j], 1.0f / k);
  }
}

TEST(MoeRouteCpu, NanLogitsStillGiveValidDistinctExperts) {
  Tensor logits = Tensor::empty({1, 6}, DType::kF32);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float values[] = {nan, 1.0f, nan, -std::numeric_limits<float>::infinity(), 0.5f, nan};
  std::copy(std::begin(values), std::end(values), logits.data<float>());
  const Routing r = route(logits, 4, false);
  const int32_t* ids = r.ids.data<int32_t>();
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 4);
  EXPECT_EQ(ids[2], 0);  // NaN and -inf rank alike: the lower id first
  EXPECT_EQ(ids[3], 2);
}

TEST(MoeRouteParams, RejectsBadTopKAndShapes) {
  std::mt19937 rng(1);
  const Tensor logits = random_tensor({3, 5}, rng);
  const Tensor ids = Tensor::empty({3, 2}, DType::kI32), w = Tensor::empty({3, 2}, DType::kF32);
  EXPECT_NO_THROW(make_moe_route_params(logits, 2, true, ids, w));
  const Tensor ids6 = Tensor::empty({3, 6}, DType::kI32), w6 = Tensor::empty({3, 6}, DType::kF32);
  EXPECT_EQ(error_code_of([&] { make_moe_route_params(logits, 6, true, ids6, w6); }),
            ErrorCode::kInvalidArgument);  // top-k > experts
  EXPECT_EQ(error_code_of([&] { make_moe_route_params(logits, 0, true, ids, w); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { make_moe_route_params(logits, 2, true, w, w); }),
            ErrorCode::kInvalidArgument);  // ids must be i32
  const Tensor too_many = random_tensor({1, kMoeMaxExperts + 1}, rng);
  EXPECT_EQ(error_code_of(
                [&] { make_moe_route_params(too_many, 2, true, ids.rows(0, 1), w.rows(0, 1)); }),
            ErrorCode::kInvalidArgument);
}

// ---- experts ---------------------------------------------------------------------------------

MoeWorkspace make_workspace(int64_t tokens, int64_t k, int64_t experts, int64_t hidden,
                            int64_t inter, bool fp8_experts = false) {
  MoeWorkspace ws;
  for (const MoeWorkspaceBuffer& b :
       moe_workspace_buffers(tokens, k, experts, hidden, inter, DType::kF32, fp8_experts)) {
    ws.*b.member = Tensor::empty(b.shape, b.dtype);
  }
  return ws;
}

double silu(double g) {
  return g / (1.0 + std::exp(-g));
}

// out[t] = sum_j w[t, j] down[e] (silu(gate[e] x) * up[e] x), e = ids[t, j], in double.
std::vector<double> reference_experts(const Tensor& x, const Routing& r, const Tensor& gate_up,
                                      const Tensor& down) {
  const int64_t tokens = x.size(0), hidden = x.size(1), k = r.ids.size(1);
  const int64_t inter = gate_up.size(1) / 2;
  std::vector<double> out(static_cast<size_t>(tokens * hidden), 0.0);
  std::vector<double> act(static_cast<size_t>(inter));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* xt = x.data<float>() + t * hidden;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = r.ids.data<int32_t>()[t * k + j];
      const double w = r.weights.data<float>()[t * k + j];
      const float* w1 = gate_up.data<float>() + e * 2 * inter * hidden;
      for (int64_t i = 0; i < inter; ++i) {
        double g = 0.0, u = 0.0;
        for (int64_t c = 0; c < hidden; ++c) {
          g += double{w1[i * hidden + c]} * xt[c];
          u += double{w1[(inter + i) * hidden + c]} * xt[c];
        }
        act[static_cast<size_t>(i)] = silu(g) * u;
      }
      const float* w2 = down.data<float>() + e * hidden * inter;
      for (int64_t c = 0; c < hidden; ++c) {
        double y = 0.0;
        for (int64_t i = 0; i < inter; ++i) y += double{w2[c * inter + i]} * act[i];
        out[static_cast<size_t>(t * hidden + c)] += w * y;
      }
    }
  }
  return out;
}

TEST(MoeExpertsCpu, WeightedSumOfTheChosenExperts) {
  std::mt19937 rng(43);
  struct Shape5 {
    int64_t experts, k, hidden, inter;
  };
  for (const Shape5 s : {Shape5{1, 1, 8, 4}, Shape5{5, 2, 48, 32}, Shape5{8, 2, 64, 13},
                         Shape5{7, 3, 33, 24}, Shape5{16, 8, 16, 7}}) {
    for (int64_t tokens : {1, 3, 7, 91}) {
      const Tensor x = random_tensor({tokens, s.hidden}, rng, 2.0f);
      const Tensor gate_up = random_tensor({s.experts, 2 * s.inter, s.hidden}, rng, 0.4f);
      const Tensor down = random_tensor({s.experts, s.hidden, s.inter}, rng, 0.4f);
      // Route with logits that skip odd experts (whenever there are enough even ones): some
      // experts get no tokens.
      Tensor logits = random_tensor({tokens, s.experts}, rng, 3.0f);
      if (s.experts >= 2 * s.k) {
        for (int64_t i = 0; i < logits.numel(); ++i) {
          if (i % s.experts % 2 == 1) logits.data<float>()[i] -= 100.0f;
        }
      }
      const Routing r = route(logits, static_cast<int32_t>(s.k), s.k > 1);
      const MoeWorkspace ws = make_workspace(tokens, s.k, s.experts, s.hidden, s.inter);
      const Tensor out = Tensor::empty({tokens, s.hidden}, DType::kF32);
      poison(out);
      moe_experts_cpu(
          make_moe_experts_params(x, r.ids, r.weights, stacked(gate_up), stacked(down), ws, out));
      expect_close(
          out, reference_experts(x, r, gate_up, down), kF32RelTol,
          fmt::format("E={} k={} hidden={} I={} T={}", s.experts, s.k, s.hidden, s.inter, tokens));
    }
  }
}

TEST(MoeExpertsCpu, ResultOfATokenDoesNotDependOnTheBatch) {
  std::mt19937 rng(47);
  const int64_t experts = 6, k = 2, hidden = 40, inter = 24, tokens = 37;
  const Tensor x = random_tensor({tokens, hidden}, rng);
  const Tensor gate_up = random_tensor({experts, 2 * inter, hidden}, rng, 0.4f);
  const Tensor down = random_tensor({experts, hidden, inter}, rng, 0.4f);
  const Routing r = route(random_tensor({tokens, experts}, rng, 3.0f), k, true);
  const MoeWorkspace ws = make_workspace(tokens, k, experts, hidden, inter);
  const Tensor all = Tensor::empty({tokens, hidden}, DType::kF32);
  moe_experts_cpu(
      make_moe_experts_params(x, r.ids, r.weights, stacked(gate_up), stacked(down), ws, all));
  for (const int64_t t : {0L, 17L, 36L}) {
    const Tensor one = Tensor::empty({1, hidden}, DType::kF32);
    moe_experts_cpu(make_moe_experts_params(x.rows(t, t + 1), r.ids.rows(t, t + 1),
                                            r.weights.rows(t, t + 1), stacked(gate_up),
                                            stacked(down), ws, one));
    EXPECT_EQ(std::memcmp(one.raw(), all.data<float>() + t * hidden, hidden * sizeof(float)), 0)
        << "token " << t;
  }
}

// An e4m3 expert stack of w [E, n, k] (f32) and the f32 weights it stands for, e4m3 value *
// scale as a load-time dequantization makes them. Scales per tensor (rows_per 0), per row
// (rows_per 1, cols_per 0) or in blocks of rows_per x cols_per over the stacked [E n, k] rows,
// each amax / 448 of what it covers; block rows padded to a multiple of 4 scales, as loaded.
struct Fp8Stack {
  Linear linear;
  Tensor dequantized;
};

Fp8Stack quantize_stack(const Tensor& w, int64_t rows_per, int64_t cols_per) {
  const int64_t rows = w.size(0) * w.size(1), k = w.size(2);
  const float* v = w.data<float>();
  const int64_t br = rows_per == 0 ? rows : rows_per, bc = cols_per == 0 ? k : cols_per;
  const int64_t scale_rows = (rows + br - 1) / br, blocks = (k + bc - 1) / bc;
  const int64_t stride = cols_per == 0 ? 1 : (blocks + 3) / 4 * 4;
  Tensor scales = Tensor::empty(rows_per == 0   ? Shape{1}
                                : cols_per == 0 ? Shape{rows}
                                                : Shape{scale_rows, stride},
                                DType::kF32);
  std::fill(scales.data<float>(), scales.data<float>() + scales.numel(), 0.0f);
  for (int64_t sr = 0; sr < scale_rows; ++sr) {
    for (int64_t b = 0; b < blocks; ++b) {
      float amax = 0.0f;
      for (int64_t r = sr * br; r < std::min(rows, (sr + 1) * br); ++r) {
        for (int64_t c = b * bc; c < std::min(k, (b + 1) * bc); ++c) {
          amax = std::max(amax, std::fabs(v[r * k + c]));
        }
      }
      scales.data<float>()[sr * stride + b] = amax > 0.0f ? amax / kE4M3Max : 1.0f;
    }
  }
  Fp8Stack out;
  out.linear.weight = Tensor::empty(w.shape(), DType::kF8E4M3);
  out.dequantized = Tensor::empty(w.shape(), DType::kF32);
  auto* q = static_cast<uint8_t*>(out.linear.weight.raw());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      const float s = scales.data<float>()[r / br * stride + c / bc];
      q[r * k + c] = f32_to_e4m3(v[r * k + c] / s);
      out.dequantized.data<float>()[r * k + c] = e4m3_to_f32(q[r * k + c]) * s;
    }
  }
  out.linear.scale = scales;
  if (cols_per > 0) {
    out.linear.block_rows = rows_per;
    out.linear.block_cols = cols_per;
  }
  return out;
}

// Weight-only FP8 experts give exactly what their dequantized weights give, in every scale
// layout: one scale, one per row, and blocks that straddle experts (8 x 16 over gate/up rows of
// 12 per expert) or not.
TEST(MoeExpertsCpu, Fp8ExpertsAreTheirDequantizedWeights) {
  std::mt19937 rng(53);
  const int64_t experts = 5, k = 2, hidden = 40, inter = 6, tokens = 9;
  const Tensor x = random_tensor({tokens, hidden}, rng, 2.0f);
  const Tensor gate_up = random_tensor({experts, 2 * inter, hidden}, rng, 0.4f);
  const Tensor down = random_tensor({experts, hidden, inter}, rng, 0.4f);
  const Routing r = route(random_tensor({tokens, experts}, rng, 3.0f), k, true);
  const MoeWorkspace ws = make_workspace(tokens, k, experts, hidden, inter);
  struct Layout {
    int64_t rows_per, cols_per;
  };
  for (const Layout l : {Layout{0, 0}, Layout{1, 0}, Layout{8, 16}, Layout{12, 4}}) {
    const Fp8Stack gu = quantize_stack(gate_up, l.rows_per, l.cols_per);
    const Fp8Stack dn = quantize_stack(down, l.rows_per, l.cols_per);
    const Tensor got = Tensor::empty({tokens, hidden}, DType::kF32);
    const Tensor want = Tensor::empty({tokens, hidden}, DType::kF32);
    moe_experts_cpu(make_moe_experts_params(x, r.ids, r.weights, gu.linear, dn.linear, ws, got));
    moe_experts_cpu(make_moe_experts_params(x, r.ids, r.weights, stacked(gu.dequantized),
                                            stacked(dn.dequantized), ws, want));
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0)
        << "scales " << l.rows_per << " x " << l.cols_per;
  }
  // Scales that do not cover the stack, or f32 ones missing: rejected.
  Fp8Stack gu = quantize_stack(gate_up, 1, 0);
  const Fp8Stack dn = quantize_stack(down, 1, 0);
  const Tensor out = Tensor::empty({tokens, hidden}, DType::kF32);
  const auto code = [&](const Linear& g) {
    return error_code_of(
        [&] { make_moe_experts_params(x, r.ids, r.weights, g, dn.linear, ws, out); });
  };
  EXPECT_NO_THROW(make_moe_experts_params(x, r.ids, r.weights, gu.linear, dn.linear, ws, out));
  Linear short_scales = gu.linear;
  short_scales.scale = gu.linear.scale.rows(0, 2 * inter);
  EXPECT_EQ(code(short_scales), ErrorCode::kInvalidArgument);
  Linear no_scales = gu.linear;
  no_scales.scale = Tensor();
  EXPECT_EQ(code(no_scales), ErrorCode::kInvalidArgument);
  Linear blocks = quantize_stack(gate_up, 8, 16).linear;
  blocks.block_cols = 4;  // the scales hold 3 blocks of 16, not 10 of 4
  EXPECT_EQ(code(blocks), ErrorCode::kInvalidArgument);
  // e4m3 gate/up with f32 down: the two must agree.
  EXPECT_EQ(error_code_of([&] {
              make_moe_experts_params(x, r.ids, r.weights, gu.linear, stacked(down), ws, out);
            }),
            ErrorCode::kInvalidArgument);
}

// Rows for quantized activations (the W8A8 path of CUDA's grouped experts) are handed on only to
// e4m3 experts, and only by a workspace made for them with room for every pair's row of
// max(hidden, I) values; the CPU reference ignores them.
TEST(MoeExpertsParams, QuantizedActivationRowsOnlyForFp8Experts) {
  std::mt19937 rng(54);
  const int64_t experts = 5, k = 2, hidden = 40, inter = 48, tokens = 9;
  const Tensor x = random_tensor({tokens, hidden}, rng, 2.0f);
  const Tensor gate_up = random_tensor({experts, 2 * inter, hidden}, rng, 0.4f);
  const Tensor down = random_tensor({experts, hidden, inter}, rng, 0.4f);
  const Routing r = route(random_tensor({tokens, experts}, rng, 3.0f), k, true);
  const Fp8Stack gu = quantize_stack(gate_up, 1, 0), dn = quantize_stack(down, 1, 0);
  const Tensor out = Tensor::empty({tokens, hidden}, DType::kF32);
  const MoeWorkspace fp8_ws = make_workspace(tokens, k, experts, hidden, inter, true);
  const MoeWorkspace plain_ws = make_workspace(tokens, k, experts, hidden, inter);
  EXPECT_EQ(fp8_ws.act_q.numel(), tokens * k * inter);  // max(hidden, I) per pair
  EXPECT_EQ(fp8_ws.act_q_scales.numel(), tokens * k);
  const MoeExpertsParams fp8 =
      make_moe_experts_params(x, r.ids, r.weights, gu.linear, dn.linear, fp8_ws, out);
  EXPECT_NE(fp8.act_q, nullptr);
  EXPECT_NE(fp8.act_q_scales, nullptr);
  EXPECT_EQ(make_moe_experts_params(x, r.ids, r.weights, gu.linear, dn.linear, plain_ws, out).act_q,
            nullptr);
  EXPECT_EQ(
      make_moe_experts_params(x, r.ids, r.weights, stacked(gate_up), stacked(down), fp8_ws, out)
          .act_q,
      nullptr);
  // A workspace made for fewer tokens has too few rows for this call's pairs.
  const MoeWorkspace small = make_workspace(tokens - 1, k, experts, hidden, inter, true);
  MoeWorkspace big_rest = make_workspace(tokens, k, experts, hidden, inter);
  big_rest.act_q = small.act_q;
  big_rest.act_q_scales = small.act_q_scales;
  EXPECT_EQ(make_moe_experts_params(x, r.ids, r.weights, gu.linear, dn.linear, big_rest, out).act_q,
            nullptr);
  // The CPU's result does not depend on them.
  const Tensor with = Tensor::empty({tokens, hidden}, DType::kF32);
  moe_experts_cpu(fp8);
  moe_experts_cpu(
      make_moe_experts_params(x, r.ids, r.weights, gu.linear, dn.linear, plain_ws, with));
  EXPECT_EQ(std::memcmp(out.raw(), with.raw(), out.nbytes()), 0);
}

TEST(MoeExpertsParams, RejectsMismatchedShapesAndSmallWorkspaces) {
  std::mt19937 rng(3);
  const int64_t experts = 4, k = 2, hidden = 8, inter = 6, tokens = 5;
  const Tensor x = random_tensor({tokens, hidden}, rng);
  const Tensor gate_up = random_tensor({experts, 2 * inter, hidden}, rng);
  const Tensor down = random_tensor({experts, hidden, inter}, rng);
  const Routing r = route(random_tensor({tokens, experts}, rng), k, true);
  const MoeWorkspace ws = make_workspace(tokens, k, experts, hidden, inter);
  const Tensor out = Tensor::empty({tokens, hidden}, DType::kF32);
  EXPECT_NO_THROW(
      make_moe_experts_params(x, r.ids, r.weights, stacked(gate_up), stacked(down), ws, out));
  const auto code = [&](const Tensor& gu, const Tensor& dn, const MoeWorkspace& w,
                        const Tensor& o) {
    return error_code_of(
        [&] { make_moe_experts_params(x, r.ids, r.weights, stacked(gu), stacked(dn), w, o); });
  };
  const Tensor down_wrong = random_tensor({experts, hidden, inter + 1}, rng);
  EXPECT_EQ(code(gate_up, down_wrong, ws, out), ErrorCode::kInvalidArgument);
  const Tensor gate_up_odd = random_tensor({experts, 2 * inter + 1, hidden}, rng);
  EXPECT_EQ(code(gate_up_odd, down, ws, out), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(gate_up, down, ws, x), ErrorCode::kInvalidArgument);  // out aliases x
  const MoeWorkspace small = make_workspace(tokens - 1, k, experts, hidden, inter);
  EXPECT_EQ(code(gate_up, down, small, out), ErrorCode::kInvalidArgument);
  const MoeWorkspace missing{};
  EXPECT_EQ(code(gate_up, down, missing, out), ErrorCode::kInvalidArgument);
  // More experts per token than experts.
  const Tensor ids5 = Tensor::empty({tokens, 5}, DType::kI32);
  const Tensor w5 = Tensor::empty({tokens, 5}, DType::kF32);
  EXPECT_EQ(error_code_of([&] {
              make_moe_experts_params(x, ids5, w5, stacked(gate_up), stacked(down),
                                      make_workspace(tokens, 5, experts, hidden, inter), out);
            }),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace inflight
