#!/usr/bin/env bash
# Paged-attention device run, in two halves (see dev/cuda/README.md for the general scheme):
#
#   dev/cuda/attention/device_run.sh stage [BUILD_DIR]   here: builds the lab bench against
#       BUILD_DIR's libraries (default build-attn, configured with INFLIGHT_CUDA=ON and
#       cuda_ops_test built), copies it, cuda_ops_test and the shared libraries the GPU image
#       lacks (spdlog, fmt) into .devrun/attn/ (ignored).
#   dev/cuda/attention/device_run.sh run                 on the GPU machine, repository root,
#       .devrun/attn carried: attention tests, the bench, memcheck and racecheck on the
#       attention tests, a SASS census of the tile kernels; logs to $OUT, tables printed last.
#       PROFILE=1 adds Nsight Compute reports of the prefill (2048 tokens) and decode (batch 32,
#       context 2048) tile kernels.
#
# The bench's matrix-rate floor comes from a bf16 8192^3 product through PyTorch on the device.
set -u -o pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$repo"
stage_dir=.devrun/attn

stage() {
  local build="${1:-build-attn}"
  mkdir -p .git/info
  grep -qx '/.devrun/' .git/info/exclude 2>/dev/null || echo '/.devrun/' >> .git/info/exclude
  rm -rf "$stage_dir" && mkdir -p "$stage_dir/bin" "$stage_dir/lib"
  cp "$build/tests/cuda/cuda_ops_test" "$stage_dir/bin/" || exit 1
  /usr/local/cuda/bin/nvcc -DFMT_SHARED -DFMT_USE_CONSTEXPR=1 -DSPDLOG_COMPILED_LIB \
    -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -I. -Isrc -Iinclude -O3 -DNDEBUG \
    --expt-relaxed-constexpr -lineinfo -std=c++20 \
    --generate-code=arch=compute_90a,code=[sm_90a] dev/cuda/attention/bench.cu \
    -o "$stage_dir/bin/attention_bench" "$build/src/ops/libinflight_ops_cuda.a" \
    "$build/src/ops/libinflight_ops.a" "$build/src/core/libinflight_core.a" -lspdlog -lfmt \
    || exit 1
  strip --strip-debug "$stage_dir"/bin/*
  ldd "$stage_dir"/bin/* | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libstdc++*|libgcc_s*|libdl.so*|libpthread*|librt.so*|ld-linux*) ;;
      libcuda*|libcublas*|libcudart*) ;;
      *) cp -L "$path" "$stage_dir/lib/$name" ;;
    esac
  done
  du -sh "$stage_dir"
}

declare -a summary_rows=()

# step NAME TIMEOUT COMMAND...: runs with a time limit, logs to $OUT/NAME.log.
step() {
  local name="$1" limit="$2"
  shift 2
  local log="$OUT/$name.log" start end rc
  start=$(date +%s)
  echo "=== $name: $*"
  timeout "$limit" "$@" > "$log" 2>&1
  rc=$?
  end=$(date +%s)
  local passed failed sanitizer
  passed=$(grep -m1 -o '\[  PASSED  \] [0-9]* test' "$log" | grep -o '[0-9]*' || true)
  failed=$(grep -m1 -o '[0-9]* FAILED TEST' "$log" | grep -o '^[0-9]*' || true)
  sanitizer=$(grep -m1 -oE '(ERROR|RACECHECK) SUMMARY: [0-9]* (error|hazard)' "$log" || true)
  grep -E '^\[  FAILED  \]|Failure|========= [A-Z]|skipped' "$log" | sort | uniq -c | sort -rn |
    head -20
  summary_rows+=("$(printf '%-16s rc=%-4s %5ss  passed=%-3s failed=%-3s %s' "$name" "$rc" \
    "$((end - start))" "${passed:-0}" "${failed:-0}" "$sanitizer")")
}

run() {
  OUT="${OUT:-/tmp/attn_run_out}"
  mkdir -p "$OUT"
  local libs d
  for d in /usr/local/cuda/lib64 /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib; do
    [[ -e "$d/libcublasLt.so.13" ]] && libs="$d" && break
  done
  export LD_LIBRARY_PATH="$repo/$stage_dir/lib${libs:+:$libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
  local sanitizer
  sanitizer="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)"
  local filter='--gtest_filter=*PagedAttention*'

  step ops 150 "$stage_dir/bin/cuda_ops_test"
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
  step bench 150 "$stage_dir/bin/attention_bench" "$peak"
  if [[ -n "$sanitizer" ]]; then
    step memcheck 150 "$sanitizer" --tool memcheck --error-exitcode 99 \
      "$stage_dir/bin/cuda_ops_test" "$filter"
    step racecheck 150 "$sanitizer" --tool racecheck --error-exitcode 99 \
      "$stage_dir/bin/cuda_ops_test" "$filter"
  fi
  if [[ "${PROFILE:-0}" == 1 ]] && command -v ncu > /dev/null; then
    local kernel name
    for kernel in "prefill 2048|ILi128ELi8ELi1ELi2ELb1E" "decode b32 ctx2048|ILi128ELi1ELi4ELi2ELb0E"; do
      name="ncu_${kernel%%|*}"
      name="${name// /_}"
      step "$name" 120 ncu --clock-control none --kernel-name-base mangled \
        -k "regex:${kernel##*|}" -c 1 --section SpeedOfLight --section WarpStateStats \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy \
        --section SchedulerStats "$stage_dir/bin/attention_bench" 790 "${kernel%%|*}" profile
      step "${name}_stalls" 120 ncu --clock-control none --kernel-name-base mangled \
        -k "regex:${kernel##*|}" -c 1 --metrics "$(printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' \
          barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle \
          lg_throttle membar dispatch_stall no_instruction selected not_selected)sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" \
        "$stage_dir/bin/attention_bench" 790 "${kernel%%|*}" profile
    done
  fi
  if command -v cuobjdump > /dev/null; then
    echo "SASS census of the tile kernels (attention_bench): sass_census.log"
    cuobjdump --dump-sass "$stage_dir/bin/attention_bench" |
      awk '/Function :/ {f=$3} /HMMA|HGMMA|LDGSTS|LDSM|LDL|STL/ {
             for (i = 1; i <= NF; i++) if ($i ~ /^(HMMA|HGMMA|LDGSTS|LDSM|LDL|STL)/) {
               split($i, op, "."); n[f " " op[1]]++ } }
           END { for (k in n) print n[k], k }' | grep tile | sort -k2 > "$OUT/sass_census.log"
  fi

  echo
  sed -n '/== CUDA vs CPU summary/,$p' "$OUT/ops.log" | head -20
  local f
  for f in "$OUT"/ncu_*.log; do
    [[ -e "$f" ]] || continue
    echo "-- $(basename "$f" .log)"
    grep -E '^\s+(Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit Rate|L1/TEX Hit Rate|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Warp Cycles Per Issued Instruction|Issued Warp Per Scheduler|No Eligible|Executed Ipc Active|smsp__average_warps_issue_stalled|sm__pipe_tensor)' "$f" |
      sed 's/  */ /g' | head -16
  done
  sed -n '/== paged attention/,$p' "$OUT/bench.log"
  tar -czf "$OUT/attn_logs.tar.gz" -C "$OUT" $(cd "$OUT" && ls *.log) && rm -f "$OUT"/*.log
  echo
  echo "== attention device run summary =="
  printf '%s\n' "${summary_rows[@]}"
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  run) run ;;
  *) echo "usage: $0 stage [BUILD_DIR] | run"; exit 2 ;;
esac
