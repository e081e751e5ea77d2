#!/usr/bin/env bash
# The CUDA backend as a serving system, on a GPU machine: tests, compute-sanitizer and the
# Llama-3.1-8B dummy-weight benchmarks, in two halves:
#
#   scripts/cuda_serving_run.sh stage [BUILD_DIR]   here, on the build machine: copies the
#       `inflight` binary and the CUDA-relevant test binaries (built in BUILD_DIR, default
#       build-cudart), the shared libraries the GPU image lacks, a SmolLM2 trimmed to 4 blocks,
#       the 64 fortune prompts the batch-invariance test reads, the Llama-3 vocabulary (for
#       `serve`) and the commit into .devrun-serving/ (ignored through .git/info/exclude).
#   scripts/cuda_serving_run.sh run [tests|bench|all]   on the GPU machine, repository root,
#       .devrun-serving/ carried along. Logs and result JSON go to $OUT; a summary table is
#       printed last.
#
# Benchmarks (bench): batch-1 decode latency, offline 128/128 throughput, and `serve` with 256
# concurrent streams from `inflight bench serve`, all on Llama-3.1-8B shapes with dummy weights.
# Environment: OFFLINE_PROMPTS (default 1024), SERVE_PROMPTS (default 768), MAX_NUM_SEQS (256).
set -u -o pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
stage_dir=.devrun-serving
binaries=(bin/inflight tests/cuda/cuda_serving_test tests/cuda/cuda_ops_test
          tests/cuda/cuda_model_test tests/engine/engine_test tests/engine/batch_invariance_test)

stage() {
  local build="${1:-build-cudart}"
  local model="${INFLIGHT_TEST_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
  local data="${INFLIGHT_DATA_DIR:-../shared/data}"
  local python="${PYTHON:-.venv/bin/python}"
  mkdir -p .git/info
  grep -qx "/$stage_dir/" .git/info/exclude 2>/dev/null || echo "/$stage_dir/" >> .git/info/exclude
  rm -rf "$stage_dir" && mkdir -p "$stage_dir/bin" "$stage_dir/lib" "$stage_dir/data/prompts"
  local b
  for b in "${binaries[@]}"; do
    cp "$build/$b" "$stage_dir/bin/" || { echo "missing $build/$b"; exit 1; }
    strip --strip-debug "$stage_dir/bin/$(basename "$b")"
  done
  # Shared libraries outside the C runtime and CUDA: the GPU image has neither spdlog nor fmt.
  ldd "$stage_dir"/bin/* | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libstdc++*|libgcc_s*|libdl.so*|libpthread*|librt.so*|ld-linux*) ;;
      libcuda*|libcublas*|libcudart*) ;;
      *) cp -L "$path" "$stage_dir/lib/$name" ;;
    esac
  done
  "$python" dev/cuda/trim_gguf.py "$model" "$stage_dir/data/model.gguf" 4 || exit 1
  # The batch-invariance test reads the first 64 fortune prompts of the shared set.
  xz -dc "$data/prompts/prompts_sharegpt_like.json.xz" | "$python" -c '
import json, sys
items = [i for i in json.load(sys.stdin) if i["source"] == "fortune"][:200]
json.dump(items, sys.stdout)' | xz -c > "$stage_dir/data/prompts/prompts_sharegpt_like.json.xz"
  cp "$data/tokenizers/gguf-vocab/ggml-vocab-llama-bpe.gguf.xz" "$stage_dir/data/"
  # The binaries travel compressed (the whole transfer is limited to 64 MiB).
  tar -cJf "$stage_dir/bin.tar.xz" -C "$stage_dir" bin && rm -rf "$stage_dir/bin"
  { git rev-parse HEAD; git status --porcelain --untracked-files=no | head -1; } \
    | awk 'NR == 1 {c = $0} NR == 2 {c = c "+dirty"} END {print c}' > "$stage_dir/commit.txt"
  du -sh "$stage_dir" "$stage_dir"/*
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

# step NAME TIMEOUT COMMAND...: runs with a time limit, logs to $OUT/logs/NAME.log.
step() {
  local name="$1" limit="$2"
  shift 2
  local log="$OUT/logs/$name.log" start end rc
  start=$(date +%s)
  echo "=== $name: $*"
  timeout "$limit" "$@" > "$log" 2>&1
  rc=$?
  end=$(date +%s)
  local passed failed skipped sanitizer
  passed=$(grep -m1 -o '\[  PASSED  \] [0-9]* test' "$log" | grep -o '[0-9]*' || true)
  failed=$(grep -m1 -o '[0-9]* FAILED TEST' "$log" | grep -o '^[0-9]*' || true)
  skipped=$(grep -m1 -o '\[  SKIPPED \] [0-9]* test' "$log" | grep -o '[0-9]*' || true)
  sanitizer=$(grep -m1 -oE '(ERROR|RACECHECK) SUMMARY: [0-9]* (error|hazard)' "$log" || true)
  grep -E '^\[  FAILED  \]|Failure|========= [A-Z]|error:|decode graphs' "$log" | sort | uniq -c \
    | sort -rn | head -12
  grep -E '^gemm |-> (GEMV|cuBLASLt)|dummy llama|copy bandwidth|batch (1|256) decode' "$log" \
    | sed -e 's/^.*\] //' | head -40
  summary_rows+=("$(printf '%-26s rc=%-4s %4ss  passed=%-3s failed=%-3s skipped=%-3s %s' "$name" \
    "$rc" "$((end - start))" "${passed:-0}" "${failed:-0}" "${skipped:-0}" "$sanitizer")")
}

run_tests() {
  local bin="$stage_dir/bin" sanitizer
  sanitizer="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)"
  step serving 240 "$bin/cuda_serving_test"
  step ops 90 "$bin/cuda_ops_test"
  step model 120 env "INFLIGHT_CUDA_TEST_MODEL=$repo/$stage_dir/data/model.gguf" \
    "$bin/cuda_model_test"
  step engine_cuda 180 "$bin/engine_test" '--gtest_filter=Devices/*'
  step batch_invariance_cuda 180 env "INFLIGHT_TEST_MODEL=$repo/$stage_dir/data/model.gguf" \
    "INFLIGHT_DATA_DIR=$repo/$stage_dir/data" "$bin/batch_invariance_test" '--gtest_filter=*/1'
  if [[ -n "$sanitizer" ]]; then
    local kernels='*FillRandom*:*TopKLogitsMatchesTheCpu*:*GemmWithF32*:*GemvMatches*'
    step memcheck_serving 150 "$sanitizer" --tool memcheck --error-exitcode 99 \
      "$bin/cuda_serving_test" "--gtest_filter=$kernels:*DecodeGraph*"
    step racecheck_top_k 120 "$sanitizer" --tool racecheck --error-exitcode 99 \
      "$bin/cuda_serving_test" '--gtest_filter=*TopKLogitsMatchesTheCpu*:*FillRandom*'
    step synccheck_top_k 90 "$sanitizer" --tool synccheck --error-exitcode 99 \
      "$bin/cuda_serving_test" '--gtest_filter=*TopKLogitsMatchesTheCpu*'
    step initcheck_top_k 90 "$sanitizer" --tool initcheck --error-exitcode 99 \
      "$bin/cuda_serving_test" '--gtest_filter=*TopKLogitsMatchesTheCpu*:*FillRandom*'
    step memcheck_ops 120 "$sanitizer" --tool memcheck --error-exitcode 99 "$bin/cuda_ops_test"
  else
    summary_rows+=("compute-sanitizer not found")
  fi
  local ncu
  ncu="$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
  if [[ -n "$ncu" ]]; then
    step profile_b1 120 "$ncu" --profile-from-start off --clock-control none \
      --metrics gpu__time_duration.sum --print-summary per-kernel \
      "$bin/cuda_serving_test" '--gtest_filter=*ProfileBatch1*'
    # Kernel name, invocations, average duration: the lines that carry them.
    grep -E '^  [A-Za-z_].*\(|gpu__time_duration.sum' "$OUT/logs/profile_b1.log" | head -80
  fi
}

run_bench() {
  local inflight="$stage_dir/bin/inflight" vocab="$OUT/llama-bpe.gguf"
  local common=(--dummy-weights --arch llama-3.1-8b --device cuda --max-model-len 4096)
  xz -dc "$stage_dir/data/ggml-vocab-llama-bpe.gguf.xz" > "$vocab"
  step bench_latency_b1 120 "$inflight" bench latency "${common[@]}" --batch-size 1 \
    --input-len 128 --output-len 128 --num-iters 5 --num-iters-warmup 2 \
    --kv-cache-memory 0.5 --result-json "$OUT/latency_b1.json"
  step bench_offline 240 "$inflight" bench offline "${common[@]}" \
    --num-prompts "${OFFLINE_PROMPTS:-1024}" --input-len 128 --output-len 128 \
    --max-num-seqs "${MAX_NUM_SEQS:-256}" --max-num-batched-tokens 8192 \
    --kv-cache-memory 0.9 --result-json "$OUT/offline_128_128.json"
  # serve + bench serve: 256 concurrent streams.
  "$inflight" serve "${common[@]}" --tokenizer "$vocab" --port 8123 \
    --max-num-seqs "${MAX_NUM_SEQS:-256}" --max-num-batched-tokens 8192 \
    --max-concurrent-requests 1024 > "$OUT/logs/serve.log" 2>&1 &
  local server=$!
  step bench_serve 240 "$inflight" bench serve --base-url http://127.0.0.1:8123 \
    --tokenizer "$vocab" --dataset random --num-prompts "${SERVE_PROMPTS:-768}" \
    --random-input-len 128 --random-output-len 128 --max-concurrency 256 --ignore-eos \
    --ready-timeout 120 --no-progress --result-json "$OUT/serve_256.json"
  kill -INT "$server" 2>/dev/null
  wait "$server"
  summary_rows+=("serve exit code: $? (errors in serve.log: $(grep -c '\[error\]' "$OUT/logs/serve.log"))")
  rm -f "$vocab"
  grep -h -E 'memory plan|backend cuda' "$OUT"/logs/bench_*.log "$OUT/logs/serve.log" | sort -u | head -4
  for f in "$OUT"/logs/bench_*.log; do sed -n '/=====/,/=====/p' "$f"; done
}

run() {
  OUT="${OUT:-/tmp/cuda_serving_out}"
  mkdir -p "$OUT/logs"
  local libs what="${1:-all}"
  [[ -d "$stage_dir/bin" ]] || tar -xJf "$stage_dir/bin.tar.xz" -C "$stage_dir"
  libs="$(find_cuda_libs)"
  export LD_LIBRARY_PATH="$repo/$stage_dir/lib${libs:+:$libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader \
    | tee "$OUT/device.txt"
  cp "$stage_dir/commit.txt" "$OUT/commit.txt"
  if ldd "$stage_dir/bin/inflight" | grep 'not found'; then
    echo "missing shared libraries"
    exit 1
  fi
  [[ "$what" == tests || "$what" == all ]] && run_tests
  [[ "$what" == bench || "$what" == all ]] && run_bench
  # At most 8 files come back from a device run: one archive of every log.
  tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
  echo
  echo "== cuda serving run summary =="
  printf '%s\n' "${summary_rows[@]}"
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 stage [BUILD_DIR] | run [tests|bench|all]"; exit 2 ;;
esac
