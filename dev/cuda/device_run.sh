#!/usr/bin/env bash
# The CUDA backend's tests on a GPU machine, in two halves:
#
#   dev/cuda/device_run.sh stage [BUILD_DIR]   here, on the build machine: copies the CUDA test
#       binaries (built in BUILD_DIR, default build-cuda), the shared libraries the GPU image
#       lacks (spdlog, fmt) and a SmolLM2 GGUF trimmed to fit the transfer limit into .devrun/
#       (ignored through .git/info/exclude).
#   dev/cuda/device_run.sh run                 on the GPU machine, from the repository root
#       with .devrun/ carried along: runs the kernel tests, the model tests, then the kernel
#       tests under compute-sanitizer (memcheck, racecheck), logs each step to $OUT, and prints
#       the tests' CUDA-vs-CPU tables and a pass/fail table last.
#
# Environment: SMOLLM2_BLOCKS (stage) blocks of SmolLM2 to keep (default 10: the full vocabulary
# plus 10 of its 30 blocks is 52 MiB; the whole model, 94 MiB, exceeds the 64 MiB a run may
# carry). CUDA_LIB_DIR (run) where libcublasLt.so.13 lives, when the search below misses it.
set -u -o pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
stage_dir=.devrun

stage() {
  local build="${1:-build-cuda}"
  local model="${INFLIGHT_TEST_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
  local blocks="${SMOLLM2_BLOCKS:-10}"
  local python="${PYTHON:-.venv/bin/python}"
  mkdir -p .git/info
  grep -qx '/.devrun/' .git/info/exclude 2>/dev/null || echo '/.devrun/' >> .git/info/exclude
  rm -rf "$stage_dir" && mkdir -p "$stage_dir/bin" "$stage_dir/lib"
  for t in cuda_ops_test cuda_model_test; do
    cp "$build/tests/cuda/$t" "$stage_dir/bin/" || { echo "missing $build/tests/cuda/$t"; exit 1; }
    strip --strip-debug "$stage_dir/bin/$t"
  done
  # Shared libraries outside the C runtime and CUDA: the GPU image has neither spdlog nor fmt.
  ldd "$stage_dir"/bin/* | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libstdc++*|libgcc_s*|libdl.so*|libpthread*|librt.so*|ld-linux*) ;;
      libcuda*|libcublas*|libcudart*) ;;
      *) cp -L "$path" "$stage_dir/lib/$name" ;;
    esac
  done
  if [[ -f "$model" ]]; then
    "$python" dev/cuda/trim_gguf.py "$model" "$stage_dir/model.gguf" "$blocks" || exit 1
  else
    echo "no model at $model: the SmolLM2 test will skip"
  fi
  ls -la "$stage_dir"/bin "$stage_dir"/lib "$stage_dir"/model.gguf 2>/dev/null
  du -sh "$stage_dir"
}

find_cuda_libs() {
  local d
  for d in ${CUDA_LIB_DIR:-} /usr/local/cuda/lib64 /usr/local/cuda/lib \
           /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu \
           /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib \
           /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib; do
    if [[ -e "$d/libcublasLt.so.13" ]]; then
      echo "$d"
      return
    fi
  done
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
  grep -E '^\[  FAILED  \]|MISMATCH|Failure|========= [A-Z]|cuBLASLt|skipped' "$log" | sort | uniq -c | sort -rn | head -20
  summary_rows+=("$(printf '%-22s rc=%-4s %5ss  passed=%-3s failed=%-3s %s' "$name" "$rc" \
    "$((end - start))" "${passed:-0}" "${failed:-0}" "$sanitizer")")
}

run() {
  OUT="${OUT:-/tmp/device_run_out}"
  mkdir -p "$OUT"
  local libs
  libs="$(find_cuda_libs)"
  export LD_LIBRARY_PATH="$repo/$stage_dir/lib${libs:+:$libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
  echo "cuBLASLt from: ${libs:-system default}"
  if ldd "$stage_dir/bin/cuda_ops_test" | grep 'not found'; then
    echo "missing shared libraries"
    exit 1
  fi
  local sanitizer
  sanitizer="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)"
  local model_env=()
  [[ -f "$stage_dir/model.gguf" ]] && model_env=(env "INFLIGHT_CUDA_TEST_MODEL=$repo/$stage_dir/model.gguf")

  step ops 60 "$stage_dir/bin/cuda_ops_test"
  step model 90 "${model_env[@]}" "$stage_dir/bin/cuda_model_test"
  if [[ -n "$sanitizer" ]]; then
    step memcheck_ops 90 "$sanitizer" --tool memcheck --error-exitcode 99 \
      "$stage_dir/bin/cuda_ops_test"
    step racecheck_ops 45 "$sanitizer" --tool racecheck --error-exitcode 99 \
      "$stage_dir/bin/cuda_ops_test" \
      '--gtest_filter=*RmsNorm*:*Swiglu*:*RopeKvWrite*:*PagedAttention*:*GatherRows*'
    step memcheck_tiny_model 45 "$sanitizer" --tool memcheck --error-exitcode 99 \
      "$stage_dir/bin/cuda_model_test" '--gtest_filter=*Tiny*'
    step initcheck_ops 45 "$sanitizer" --tool initcheck --error-exitcode 99 \
      "$stage_dir/bin/cuda_ops_test"
    step synccheck_ops 45 "$sanitizer" --tool synccheck --error-exitcode 99 \
      "$stage_dir/bin/cuda_ops_test"
    # initcheck does not follow the stores of cuBLASLt's kernels (every later read of a GEMM
    # output is reported), so the model runs here with the CUDA-core GEMM: this checks that no
    # kernel of ours reads memory nothing wrote, the paged KV cache included.
    step initcheck_core_gemm_model 60 "$sanitizer" --tool initcheck --error-exitcode 99 \
      "$stage_dir/bin/cuda_model_test" '--gtest_filter=*CoreGemm*'
    step racecheck_core_gemm_model 60 "$sanitizer" --tool racecheck --error-exitcode 99 \
      "$stage_dir/bin/cuda_model_test" '--gtest_filter=*CoreGemm*'
  else
    summary_rows+=("compute-sanitizer not found")
  fi

  echo
  for name in ops model; do
    sed -n '/== CUDA vs CPU summary/,$p' "$OUT/$name.log"
    grep -E '^(smollm2|tiny)' "$OUT/$name.log" | grep -v 'greedy tokens:' | head -20
  done
  # At most 8 files come back from a device run: one archive of every log.
  tar -czf "$OUT/device_logs.tar.gz" -C "$OUT" $(cd "$OUT" && ls *.log) && rm -f "$OUT"/*.log
  echo
  echo "== device run summary (time limits keep the whole run under 9 minutes) =="
  printf '%s\n' "${summary_rows[@]}"
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  run) run ;;
  *) echo "usage: $0 stage [BUILD_DIR] | run"; exit 2 ;;
esac
