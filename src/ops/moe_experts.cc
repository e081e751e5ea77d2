#include "ops/moe_experts.h"

#include <algorithm>

#include "ops/op_checks.h"

namespace inflight {

namespace {

constexpr const char* kOp = "moe_experts";

// A workspace tensor of `dtype` on `device` with `cols` columns (0: 1-D) and at least `rows`
// rows.
void check_scratch(const char* arg, const Tensor& t, DType dtype, Device device, int64_t rows,
                   int64_t cols) {
  check_tensor_kind(kOp, arg, t, dtype, device, cols > 0 ? 2 : 1);
  INFLIGHT_CHECK_CODE(
      t.size(0) >= rows && (cols == 0 || t.size(1) == cols), ErrorCode::kInvalidArgument,
      "{}: workspace '{}' has shape {}, needs at least {} rows{}", kOp, arg, shape_str(t.shape()),
      rows, cols > 0 ? fmt::format(" of {} columns", cols) : std::string());
}

// The scales of the e4m3 expert stack w [E, n, k] (MoeWeightScales), checked against its shape.
MoeWeightScales weight_scales(const char* arg, const Linear& w, Device dev) {
  const Tensor& s = w.scale;
  const int64_t rows = w.weight.size(0) * w.weight.size(1), k = w.weight.size(2);
  INFLIGHT_CHECK_CODE(s.defined() && s.dtype() == DType::kF32 && s.device() == dev,
                      ErrorCode::kInvalidArgument, "{}: e4m3 {} needs f32 scales on its device",
                      kOp, arg);
  MoeWeightScales m;
  m.s = s.data<float>();
  if (w.block_rows > 0) {
    INFLIGHT_CHECK_CODE(
        w.block_cols > 0 && s.dim() == 2 && s.size(0) == (rows + w.block_rows - 1) / w.block_rows &&
            s.size(1) >= (k + w.block_cols - 1) / w.block_cols,
        ErrorCode::kInvalidArgument, "{}: {} scales {} do not cover {} x {} in blocks of {} x {}",
        kOp, arg, shape_str(s.shape()), rows, k, w.block_rows, w.block_cols);
    m.rows_per = w.block_rows;
    m.cols_per = w.block_cols;
    m.stride = s.size(1);
  } else {
    INFLIGHT_CHECK_CODE(
        s.numel() == 1 || (s.dim() == 1 && s.size(0) == rows), ErrorCode::kInvalidArgument,
        "{}: {} scales {} must be [1] or one per row [{}]", kOp, arg, shape_str(s.shape()), rows);
    m.stride = s.numel() == 1 ? 0 : 1;
  }
  return m;
}

}  // namespace

MoeExpertsParams make_moe_experts_params(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                         const Linear& gate_up, const Linear& down,
                                         const MoeWorkspace& ws, const Tensor& out) {
  INFLIGHT_CHECK_CODE(x.defined() && is_float_dtype(x.dtype()), ErrorCode::kInvalidArgument,
                      "{}: x must be a float tensor", kOp);
  const DType dt = x.dtype();
  const Device dev = x.device();
  const Tensor& gate_up_w = gate_up.weight;
  const Tensor& down_w = down.weight;
  const bool fp8 = gate_up_w.defined() && gate_up_w.dtype() == DType::kF8E4M3;
  const DType wt = fp8 ? DType::kF8E4M3 : dt;
  INFLIGHT_CHECK_CODE(!gate_up.bias.defined() && !down.bias.defined(), ErrorCode::kInvalidArgument,
                      "{}: expert biases are not supported", kOp);
  check_tensor_kind(kOp, "x", x, dt, dev, 2);
  check_tensor_kind(kOp, "gate_up_w", gate_up_w, wt, dev, 3);
  const int64_t tokens = x.size(0), hidden = x.size(1);
  const int64_t experts = gate_up_w.size(0), inter = gate_up_w.size(1) / 2;
  INFLIGHT_CHECK_CODE(gate_up_w.size(1) % 2 == 0 && inter > 0 && gate_up_w.size(2) == hidden,
                      ErrorCode::kInvalidArgument,
                      "{}: gate_up_w {} must be [experts, 2 I, hidden {}]", kOp,
                      shape_str(gate_up_w.shape()), hidden);
  INFLIGHT_CHECK_CODE(experts >= 1 && experts <= kMoeMaxExperts, ErrorCode::kInvalidArgument,
                      "{}: {} experts, expected 1..{}", kOp, experts, kMoeMaxExperts);
  check_tensor(kOp, "down_w", down_w, wt, dev, {experts, hidden, inter});
  check_tensor_kind(kOp, "ids", ids, DType::kI32, dev, 2);
  const int64_t k = ids.size(1);
  INFLIGHT_CHECK_CODE(ids.size(0) == tokens && k >= 1 && k <= experts && k <= kMoeMaxTopK,
                      ErrorCode::kInvalidArgument,
                      "{}: ids {} must be [{} tokens, k] with 1 <= k <= min({} experts, {})", kOp,
                      shape_str(ids.shape()), tokens, experts, kMoeMaxTopK);
  check_tensor(kOp, "weights", weights, DType::kF32, dev, {tokens, k});
  check_tensor(kOp, "out", out, dt, dev, {tokens, hidden});
  INFLIGHT_CHECK_CODE(out.raw() != x.raw() || out.numel() == 0, ErrorCode::kInvalidArgument,
                      "{}: out must not alias x", kOp);
  const int64_t pairs = tokens * k;
  INFLIGHT_CHECK_CODE(pairs <= INT32_MAX, ErrorCode::kInvalidArgument,
                      "{}: {} tokens x top-{} pairs exceed 2^31 - 1", kOp, tokens, k);
  check_scratch("gate_up", ws.gate_up, dt, dev, pairs, 2 * inter);
  check_scratch("act", ws.act, dt, dev, pairs, inter);
  check_scratch("expert_out", ws.expert_out, dt, dev, pairs, hidden);
  check_scratch("expert_offsets", ws.expert_offsets, DType::kI32, dev, experts + 1, 0);
  check_scratch("sorted_pairs", ws.sorted_pairs, DType::kI32, dev, pairs, 0);
  check_scratch("pair_position", ws.pair_position, DType::kI32, dev, pairs, 0);
  const int64_t tiles = moe_max_tiles(pairs, experts);
  check_scratch("tile_expert", ws.tile_expert, DType::kI32, dev, tiles, 0);
  check_scratch("tile_start", ws.tile_start, DType::kI32, dev, tiles, 0);
  check_scratch("num_tiles", ws.num_tiles, DType::kI32, dev, 1, 0);

  MoeExpertsParams p;
  p.x = x.raw();
  p.ids = ids.data<int32_t>();
  p.weights = weights.data<float>();
  p.gate_up_w = gate_up_w.raw();
  p.down_w = down_w.raw();
  if (fp8) {
    p.gate_up_scales = weight_scales("gate_up_w", gate_up, dev);
    p.down_scales = weight_scales("down_w", down, dev);
  }
  p.fp8_weights = fp8;
  p.out = out.raw();
  p.gate_up = ws.gate_up.raw();
  p.act = ws.act.raw();
  p.expert_out = ws.expert_out.raw();
  p.expert_offsets = ws.expert_offsets.data<int32_t>();
  p.sorted_pairs = ws.sorted_pairs.data<int32_t>();
  p.pair_position = ws.pair_position.data<int32_t>();
  p.tile_expert = ws.tile_expert.data<int32_t>();
  p.tile_start = ws.tile_start.data<int32_t>();
  p.num_tiles = ws.num_tiles.data<int32_t>();
  // Quantized activations where the workspace has rows for them (FP8 experts only).
  const Tensor& q = ws.act_q;
  const Tensor& q_scales = ws.act_q_scales;
  if (fp8 && q.defined() && q_scales.defined() && q.dtype() == DType::kF8E4M3 &&
      q_scales.dtype() == DType::kF32 && q.device() == dev && q_scales.device() == dev &&
      q.numel() >= pairs * std::max(hidden, inter) && q_scales.numel() >= pairs) {
    p.act_q = static_cast<uint8_t*>(q.raw());
    p.act_q_scales = q_scales.data<float>();
  }
  p.tokens = tokens;
  p.hidden = hidden;
  p.inter = inter;
  p.num_experts = experts;
  p.k = static_cast<int32_t>(k);
  p.dtype = dt;
  return p;
}

}  // namespace inflight
