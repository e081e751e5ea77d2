#!/usr/bin/env bash
# Paged-attention device run, in two halves (see dev/cuda/README.md for the general scheme):
#
#   dev/cuda/attention/device_run.sh stage [BUILD_DIR]   here: builds the lab bench against
#       BUILD_DIR's libraries (default build-attn, configured with INFLIGHT_CUDA=ON and
#       cuda_ops_test built) and stages it with cuda_ops_test into $STAGE (default .devrun-attn,
#       git-ignored; dev/cuda/device_lib.sh).
#   dev/cuda/attention/device_run.sh run                 on the GPU machine, repository root,
#       $STAGE carried: attention tests, the bench, memcheck and racecheck on the attention
#       tests, a SASS census of the tile kernels; logs to $OUT, tables printed last.
#       PROFILE=1 adds Nsight Compute reports of the prefill (2048 tokens) and decode (batch 32,
#       context 2048) tile kernels, or of PROFILE_CASES ("case|mangled-name regex;..."). SANITIZE=0
#       skips memcheck and racecheck; SANITIZE_FILTER
#       (gtest filter, default all paged-attention tests) narrows them; STEP_LIMIT (seconds,
#       default 150) bounds each step.
#
# The bench's matrix-rate floor comes from a bf16 8192^3 product through PyTorch on the device.
set -u -o pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$repo"
source dev/cuda/device_lib.sh
stage_dir="${STAGE:-.devrun-attn}"

stage() {
  local build="${1:-build-attn}"
  stage_begin "$stage_dir"
  stage_binary "$stage_dir" "$build/tests/cuda/cuda_ops_test" || exit 1
  build_lab "$stage_dir" dev/cuda/attention/bench.cu attention_bench "$build" || exit 1
  stage_finish "$stage_dir"
}

run() {
  OUT="${OUT:-/tmp/attn_run_out}"
  device_setup "$stage_dir" || exit 1
  local bin_dir="$stage_dir/bin"
  local filter="--gtest_filter=${SANITIZE_FILTER:-*PagedAttention*}" limit="${STEP_LIMIT:-150}"

  step ops "$limit" "$bin_dir/cuda_ops_test"
  local peak
  peak=$(timeout 60 python3 -c '
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3): a @ b
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(10): a @ b
e.record(); torch.cuda.synchronize()
print(round(2 * 8192**3 * 10 / (s.elapsed_time(e) / 1e3) / 1e12))' 2>/dev/null || echo 790)
  echo "bf16 matrix rate (torch 8192^3): $peak TFLOP/s"
  step bench "$limit" "$bin_dir/attention_bench" "$peak"
  if [[ -n "$SANITIZER" && "${SANITIZE:-1}" == 1 ]]; then
    step memcheck "$limit" "$SANITIZER" --tool memcheck --error-exitcode 99 \
      "$bin_dir/cuda_ops_test" "$filter"
    step racecheck "$limit" "$SANITIZER" --tool racecheck --error-exitcode 99 \
      "$bin_dir/cuda_ops_test" "$filter"
  fi
  if [[ "${PROFILE:-0}" == 1 && -n "$NCU" ]]; then
    local kernel name
    local -a kernels=("prefill 2048|ILi128ELi8ELi1ELi2ELb1E" "decode b32 ctx2048|ILi128ELi1ELi4ELi2ELb0E")
    [[ -n "${PROFILE_CASES:-}" ]] && IFS=';' read -r -a kernels <<< "$PROFILE_CASES"
    for kernel in "${kernels[@]}"; do
      name="ncu_${kernel%%|*}"
      name="${name// /_}"
      step "$name" 120 "$NCU" --clock-control none --kernel-name-base mangled \
        -k "regex:${kernel##*|}" -c 1 --section SpeedOfLight --section WarpStateStats \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy \
        --section SchedulerStats "$bin_dir/attention_bench" 790 "${kernel%%|*}" profile
      step "${name}_stalls" 120 "$NCU" --clock-control none --kernel-name-base mangled \
        -k "regex:${kernel##*|}" -c 1 --metrics "$(printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' \
          barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle \
          lg_throttle membar dispatch_stall no_instruction selected not_selected)sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" \
        "$bin_dir/attention_bench" 790 "${kernel%%|*}" profile
    done
  fi
  if command -v cuobjdump > /dev/null; then
    echo "SASS census of the tile kernels (attention_bench): sass_census.log"
    cuobjdump --dump-sass "$bin_dir/attention_bench" |
      awk '/Function :/ {f=$3} /HMMA|HGMMA|LDGSTS|LDSM|LDL|STL/ {
             for (i = 1; i <= NF; i++) if ($i ~ /^(HMMA|HGMMA|LDGSTS|LDSM|LDL|STL)/) {
               split($i, op, "."); n[f " " op[1]]++ } }
           END { for (k in n) print n[k], k }' | grep tile | sort -k2 > "$OUT/logs/sass_census.log"
  fi

  echo
  sed -n '/== CUDA vs CPU summary/,$p' "$OUT/logs/ops.log" | head -20
  local f
  for f in "$OUT"/logs/ncu_*.log; do
    [[ -e "$f" ]] || continue
    echo "-- $(basename "$f" .log)"
    grep -E '^\s+(Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit Rate|L1/TEX Hit Rate|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Warp Cycles Per Issued Instruction|Issued Warp Per Scheduler|No Eligible|Executed Ipc Active|smsp__average_warps_issue_stalled|sm__pipe_tensor)' "$f" |
      sed 's/  */ /g' | head -16
  done
  sed -n '/== paged attention/,$p' "$OUT/logs/bench.log"
  finish_run "attention device run"
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  run) run ;;
  *) echo "usage: $0 stage [BUILD_DIR] | run"; exit 2 ;;
esac
