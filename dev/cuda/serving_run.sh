#!/usr/bin/env bash
# The CUDA backend as a serving system, on a GPU machine: tests, compute-sanitizer and the
# Llama-3.1-8B dummy-weight benchmarks, in two halves:
#
#   dev/cuda/serving_run.sh stage [BUILD_DIR]   here, on the build machine: copies the
#       `inflight` binary and the CUDA-relevant test binaries (built in BUILD_DIR, default
#       build-cuda), the shared libraries the GPU image lacks, a SmolLM2 trimmed to 4 blocks,
#       the 64 fortune prompts the batch-invariance test reads, the Llama-3 vocabulary (for
#       `serve`) and the commit into .devrun-serving/ (ignored through .git/info/exclude).
#   dev/cuda/serving_run.sh run [tests|bench|perf|all]   on the GPU machine, repository root,
#       .devrun-serving/ carried along. Logs and result JSON go to $OUT; a summary table is
#       printed last.
#
# Benchmarks (bench): batch-1 decode latency, offline 128/128 throughput, and `serve` with 256
# concurrent streams from `inflight bench serve`, all on Llama-3.1-8B shapes with dummy weights.
# The performance figures (perf): the roofline and every figure of the performance table in
# docs/benchmarks.md (batch-1 decode, prefill of 2,048 tokens, device idle at 256 running, offline
# 128/128, 1000/1000 and 2048/128, TTFT over HTTP).
# Environment: OFFLINE_PROMPTS (default 1024), SERVE_PROMPTS (default 768), MAX_NUM_SEQS (256);
# perf: PROMPTS_128 (4096), PROMPTS_1000 (2048), PROMPTS_2048 (2048), MAX_BATCHED (8192, the
# offline runs' --max-num-batched-tokens), PERF_ONLY (a regex of figure names to run: roofline
# b1 prefill idle o128 o1000 o2048 ttft).
set -u -o pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
stage_dir="${STAGE_DIR:-.devrun-serving}"
binaries=(bin/inflight tests/cuda/cuda_serving_test tests/cuda/cuda_ops_test
          tests/cuda/cuda_model_test tests/engine/engine_test tests/engine/batch_invariance_test)

stage() {
  local build="${1:-build-cuda}"
  local model="${INFLIGHT_TEST_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
  local data="${INFLIGHT_DATA_DIR:-../shared/data}"
  local python="${PYTHON:-.venv/bin/python}"
  mkdir -p "$(git rev-parse --git-common-dir)/info"
  grep -qx "/$stage_dir/" "$(git rev-parse --git-common-dir)/info/exclude" 2>/dev/null || echo "/$stage_dir/" >> "$(git rev-parse --git-common-dir)/info/exclude"
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

# perf_step NAME TIMEOUT ARGS...: one figure, unless PERF_ONLY leaves it out.
perf_step() {
  [[ "$1" =~ ^(${PERF_ONLY:-.*})$ ]] || return 0
  step "$@"
}

run_perf() {
  local inflight="$stage_dir/bin/inflight" vocab="$OUT/llama-bpe.gguf"
  local common=(--dummy-weights --arch llama-3.1-8b --device cuda)
  xz -dc "$stage_dir/data/ggml-vocab-llama-bpe.gguf.xz" > "$vocab"
  perf_step roofline 120 "$inflight" bench roofline --device cuda --arch llama-3.1-8b \
    --result-json "$OUT/roofline.json"
  perf_step b1 120 "$inflight" bench latency "${common[@]}" --max-model-len 4096 \
    --batch-size 1 --input-len 128 --output-len 128 --num-iters 5 --num-iters-warmup 2 \
    --kv-cache-memory 0.5 --result-json "$OUT/latency_b1.json"
  perf_step prefill 120 "$inflight" bench latency "${common[@]}" --max-model-len 4096 \
    --batch-size 1 --input-len 2048 --output-len 1 --num-iters 10 --num-iters-warmup 3 \
    --max-num-batched-tokens 8192 --kv-cache-memory 0.5 --result-json "$OUT/prefill_2048.json"
  perf_step idle 120 "$inflight" bench latency "${common[@]}" --max-model-len 4096 \
    --batch-size 256 --input-len 128 --output-len 128 --num-iters 3 --num-iters-warmup 1 \
    --max-num-seqs 256 --max-num-batched-tokens 8192 --kv-cache-memory 0.9 \
    --result-json "$OUT/latency_b256.json"
  local -a offline=(bench offline "${common[@]}" --max-num-seqs "${MAX_NUM_SEQS:-256}"
                    --max-num-batched-tokens "${MAX_BATCHED:-8192}" --kv-cache-memory 0.9)
  perf_step o128 200 "$inflight" "${offline[@]}" --max-model-len 4096 \
    --num-prompts "${PROMPTS_128:-4096}" --input-len 128 --output-len 128 \
    --result-json "$OUT/offline_128_128.json"
  perf_step o2048 300 "$inflight" "${offline[@]}" --max-model-len 4096 \
    --num-prompts "${PROMPTS_2048:-2048}" --input-len 2048 --output-len 128 \
    --result-json "$OUT/offline_2048_128.json"
  perf_step o1000 560 "$inflight" "${offline[@]}" --max-model-len 4096 \
    --num-prompts "${PROMPTS_1000:-2048}" --input-len 1000 --output-len 1000 \
    --result-json "$OUT/offline_1000_1000.json"
  if [[ ttft =~ ^(${PERF_ONLY:-.*})$ ]]; then
    "$inflight" serve "${common[@]}" --max-model-len 4096 --tokenizer "$vocab" --port 8124 \
      > "$OUT/logs/serve_ttft.log" 2>&1 &
    local server=$!
    step ttft 180 "$inflight" bench serve --base-url http://127.0.0.1:8124 --tokenizer "$vocab" \
      --dataset random --num-prompts 50 --num-warmups 5 --random-input-len 128 \
      --random-output-len 4 --max-concurrency 1 --ignore-eos --ready-timeout 120 \
      --no-progress --result-json "$OUT/ttft_http.json"
    kill -INT "$server" 2>/dev/null
    wait "$server"
  fi
  rm -f "$vocab"
  local f
  for f in "$OUT"/logs/{roofline,b1,prefill,idle,o128,o2048,o1000,ttft}.log; do
    [[ -f "$f" ]] || continue
    grep -E 'Copy bandwidth|Matrix rate|Decode floor|Prefill floor|Median decode step|Median TTFT|Output token throughput|Device idle|Elapsed time|Failed requests|TTFT \(ms\)' "$f" \
      | sed "s|^|$(basename "$f" .log): |"
  done
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
  INFLIGHT_SOURCE_COMMIT="$(cat "$stage_dir/commit.txt")"  # recorded in every result JSON
  export INFLIGHT_SOURCE_COMMIT
  if ldd "$stage_dir/bin/inflight" | grep 'not found'; then
    echo "missing shared libraries"
    exit 1
  fi
  [[ "$what" == tests || "$what" == all ]] && run_tests
  [[ "$what" == bench || "$what" == all ]] && run_bench
  [[ "$what" == perf ]] && run_perf
  # At most 8 files come back from a device run: one archive of every log.
  tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
  echo
  echo "== cuda serving run summary =="
  printf '%s\n' "${summary_rows[@]}"
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 stage [BUILD_DIR] | run [tests|bench|perf|all]"; exit 2 ;;
esac
