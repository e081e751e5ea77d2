#!/usr/bin/env bash
# The CUDA backend on a GPU machine: tests, compute-sanitizer, benchmarks and the performance
# figures, in two halves (helpers in dev/cuda/device_lib.sh):
#
#   dev/cuda/device_run.sh stage [BUILD_DIR]   here, on the build machine: the `inflight` binary
#       and the CUDA-relevant test binaries (built in BUILD_DIR, default build-cuda), the shared
#       libraries the GPU image lacks, a SmolLM2 trimmed to $SMOLLM2_BLOCKS blocks (default 4;
#       the whole 94 MiB model exceeds the 64 MiB a run may carry, dev/cuda/README.md), the 200
#       fortune prompts the batch-invariance test reads, the Llama-3 vocabulary (for `serve`) and
#       the commit, into $STAGE_DIR (default .devrun-serving, git-ignored).
#   dev/cuda/device_run.sh run [tests|bench|perf|startup|parallel|structured|repository|all]   on the GPU machine, repository root,
#       the staging directory carried along. Logs and result JSON go to $OUT; a summary last.
#
# tests: every CUDA test binary (kernels vs the CPU, models vs the CPU, engine on CUDA, batch
# invariance with the trimmed SmolLM2), compute-sanitizer (memcheck, racecheck, synccheck,
# initcheck) and an ncu kernel profile of a batch-1 decode step.
# bench: batch-1 decode latency, offline 128/128 throughput, and `serve` with 256 concurrent
# streams from `inflight bench serve`, on Llama-3.1-8B shapes with dummy weights.
# perf: the roofline and every figure of the performance table in docs/benchmarks.md (batch-1
# decode, prefill of 2,048 tokens, device idle at 256 running, offline 128/128, 1000/1000 and
# 2048/128, TTFT over HTTP).
# startup: `inflight serve --model DIR` on a Llama-3.1-8B-shaped bf16 safetensors checkpoint
# (random weights written by transformers, files in the page cache): launch to /health 200 and
# peak host RSS, for bin/inflight and, when staged (stage with BASE_BIN=path), bin/inflight-base;
# transformers' own load of the same files onto the GPU for reference.
# Environment: LABS (stage: lab programs to build into bin/, e.g. dev/cuda/gemm/algo_lab.cu),
# OFFLINE_PROMPTS (default 1024), SERVE_PROMPTS (768), MAX_NUM_SEQS (256);
# perf: PROMPTS_128 (4096), PROMPTS_1000 (2048), PROMPTS_2048 (2048), MAX_NUM_SEQS and
# MAX_BATCHED (0: the engine's defaults from the memory plan; the offline runs'
# --max-num-seqs and --max-num-batched-tokens), KV_MEMORY (auto, their --kv-cache-memory),
# PERF_ONLY (a regex of figure names to run: roofline
# b1 prefill idle o128 o1000 o2048 ttft), QUANT (e.g. fp8: --quantization for every figure),
# KV_DTYPE (e.g. fp8: --kv-cache-dtype for every figure), TP (--tensor-parallel-size), MAX_MODEL_LEN
# (default 4096; 2048 for MPT), ARCH
# (the dummy-weights preset, default llama-3.1-8b), PERF_BIN (the staged binary to measure, default
# inflight; inflight-base for before figures when staged with BASE_BIN, and BASE_COMMIT its
# commit).
# parallel: tensor and pipeline parallelism over the machine's GPUs (TP, default all; ARCH,
# default llama-3.1-8b) in the layouts PAR_LAYOUTS names (default tp1 tp<N> pp<N>, and from 4
# GPUs tp<N/2>pp2 and net_tp<N/2>pp2, the latter through NCCL's network transport; QUANT and
# KV_DTYPE as for perf): the greedy
# continuations of dummy weights in each, compared with tp1 token for token
# (dev/cuda/compare_greedy.py: ties at bf16 precision reported), the all-reduce sweep
# (`bench collectives`), batch-1 decode in each layout and offline 128/128 in the layouts
# PAR_OFFLINE names (default all but tp1). PERF_ONLY picks steps by name (greedy_<layout>,
# collectives_tp<N>, b1_<layout>, o128_<layout>).
# repository: two models of a --model-repository on one GPU, their memory shares by nvidia-smi.
# structured: offline 256 x 128/128 with and without a JSON schema on every request.
set -u -o pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
source dev/cuda/device_lib.sh
stage_dir="${STAGE_DIR:-.devrun-serving}"

stage() {
  local build="${1:-build-cuda}"
  local model="${INFLIGHT_TEST_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
  local data="${INFLIGHT_DATA_DIR:-../shared/data}"
  local python="${PYTHON:-.venv/bin/python}"
  stage_begin "$stage_dir"
  mkdir -p "$stage_dir/data/prompts"
  stage_binary "$stage_dir" "$build/bin/inflight" "$build"/tests/cuda/cuda_{serving,ops,model}_test \
    "$build"/tests/engine/{engine,batch_invariance}_test || exit 1
  if [[ -n "${BASE_BIN:-}" ]]; then  # an earlier build, for before/after figures
    cp "$BASE_BIN" "$stage_dir/bin/inflight-base" && strip --strip-debug "$stage_dir/bin/inflight-base"
    echo "${BASE_COMMIT:-unknown}" > "$stage_dir/base_commit.txt"  # its commit, for its results
  fi
  # Lab programs named in $LABS (dev/cuda/*/NAME.cu, one file each) as bin/NAME.
  local lab
  for lab in ${LABS:-}; do
    build_lab "$stage_dir" "$lab" "$(basename "$lab" .cu)" "$build" || exit 1
  done
  "$python" dev/cuda/trim_gguf.py "$model" "$stage_dir/data/model.gguf" "${SMOLLM2_BLOCKS:-4}" \
    || exit 1
  # The batch-invariance test reads the fortune prompts of the shared set.
  xz -dc "$data/prompts/prompts_sharegpt_like.json.xz" | "$python" -c '
import json, sys
items = [i for i in json.load(sys.stdin) if i["source"] == "fortune"][:200]
json.dump(items, sys.stdout)' | xz -c > "$stage_dir/data/prompts/prompts_sharegpt_like.json.xz"
  cp "$data/tokenizers/gguf-vocab/ggml-vocab-llama-bpe.gguf.xz" "$stage_dir/data/"
  stage_finish "$stage_dir"
}

run_tests() {
  local bin="$stage_dir/bin" model="$stage_dir/data/model.gguf"
  step serving 240 "$bin/cuda_serving_test"
  step ops 180 "$bin/cuda_ops_test"
  step model 120 env "INFLIGHT_CUDA_TEST_MODEL=$model" "$bin/cuda_model_test"
  step engine_cuda 180 "$bin/engine_test" '--gtest_filter=Devices/*'
  step batch_invariance_cuda 180 env "INFLIGHT_TEST_MODEL=$model" \
    "INFLIGHT_DATA_DIR=$stage_dir/data" "$bin/batch_invariance_test" '--gtest_filter=*/1:*/cuda_*'
  if [[ -n "$SANITIZER" ]]; then
    local s=("$SANITIZER" --error-exitcode 99)
    local kernels='*FillRandom*:*TopKLogitsMatchesTheCpu*:*GemmWithF32*:*GemvMatches*'
    step memcheck_serving 150 "${s[@]}" --tool memcheck "$bin/cuda_serving_test" \
      "--gtest_filter=$kernels:*DecodeGraph*"
    step racecheck_top_k 120 "${s[@]}" --tool racecheck "$bin/cuda_serving_test" \
      '--gtest_filter=*TopKLogitsMatchesTheCpu*:*FillRandom*'
    step synccheck_top_k 90 "${s[@]}" --tool synccheck "$bin/cuda_serving_test" \
      '--gtest_filter=*TopKLogitsMatchesTheCpu*'
    step initcheck_top_k 90 "${s[@]}" --tool initcheck "$bin/cuda_serving_test" \
      '--gtest_filter=*TopKLogitsMatchesTheCpu*:*FillRandom*'
    step memcheck_ops 240 "${s[@]}" --tool memcheck "$bin/cuda_ops_test"
    step racecheck_ops 150 "${s[@]}" --tool racecheck "$bin/cuda_ops_test" \
      '--gtest_filter=*RmsNorm*:*LayerNorm*:*Swiglu*:*RopeKvWrite*:*PagedAttention*:*GatherRows*'
    step synccheck_ops 60 "${s[@]}" --tool synccheck "$bin/cuda_ops_test"
    step memcheck_tiny_model 60 "${s[@]}" --tool memcheck "$bin/cuda_model_test" \
      '--gtest_filter=*Tiny*'
    # initcheck does not follow the stores of cuBLASLt's kernels (every later read of a GEMM
    # output is reported), so the model runs here with the CUDA-core GEMM: no kernel of ours
    # reads memory that nothing wrote, the paged KV cache included.
    step initcheck_core_gemm_model 60 "${s[@]}" --tool initcheck "$bin/cuda_model_test" \
      '--gtest_filter=*CoreGemm*'
    step racecheck_core_gemm_model 150 "${s[@]}" --tool racecheck "$bin/cuda_model_test" \
      '--gtest_filter=*CoreGemm*'
  else
    summary_rows+=("compute-sanitizer not found or NO_TOOLS set")
  fi
  if [[ -n "$NCU" ]]; then
    step profile_b1 120 "$NCU" --profile-from-start off --clock-control none \
      --metrics gpu__time_duration.sum --print-summary per-kernel \
      "$bin/cuda_serving_test" '--gtest_filter=*ProfileBatch1*'
    # Kernel name, invocations, average duration: the lines that carry them.
    grep -E '^  [A-Za-z_].*\(|gpu__time_duration.sum' "$OUT/logs/profile_b1.log" | head -80
  fi
  sed -n '/== CUDA vs CPU summary/,$p' "$OUT/logs/ops.log" "$OUT/logs/model.log" | head -40
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
  local inflight="$stage_dir/bin/${PERF_BIN:-inflight}" vocab="$OUT/llama-bpe.gguf"
  if [[ "${PERF_BIN:-}" == inflight-base ]]; then
    INFLIGHT_SOURCE_COMMIT="$(cat "$stage_dir/base_commit.txt")"  # the result files' commit
    export INFLIGHT_SOURCE_COMMIT
  fi
  local common=(--dummy-weights --arch "${ARCH:-llama-3.1-8b}" --device cuda)
  [[ -n "${QUANT:-}" ]] && common+=(--quantization "$QUANT")
  [[ -n "${KV_DTYPE:-}" ]] && common+=(--kv-cache-dtype "$KV_DTYPE")
  [[ -n "${TP:-}" ]] && common+=(--tensor-parallel-size "$TP")
  xz -dc "$stage_dir/data/ggml-vocab-llama-bpe.gguf.xz" > "$vocab"
  perf_step roofline 120 "$inflight" bench roofline --device cuda --arch "${ARCH:-llama-3.1-8b}" \
    --result-json "$OUT/roofline.json"
  perf_step b1 120 "$inflight" bench latency "${common[@]}" --max-model-len "${MAX_MODEL_LEN:-4096}" \
    --batch-size 1 --input-len 128 --output-len 128 --num-iters 5 --num-iters-warmup 2 \
    --kv-cache-memory 0.5 --result-json "$OUT/latency_b1.json"
  perf_step prefill 120 "$inflight" bench latency "${common[@]}" --max-model-len "${MAX_MODEL_LEN:-4096}" \
    --batch-size 1 --input-len 2048 --output-len 1 --num-iters 10 --num-iters-warmup 3 \
    --max-num-batched-tokens 8192 --kv-cache-memory 0.5 --result-json "$OUT/prefill_2048.json"
  perf_step idle 120 "$inflight" bench latency "${common[@]}" --max-model-len "${MAX_MODEL_LEN:-4096}" \
    --batch-size 256 --input-len 128 --output-len 128 --num-iters 3 --num-iters-warmup 1 \
    --max-num-seqs 256 --max-num-batched-tokens 8192 --kv-cache-memory 0.9 \
    --result-json "$OUT/latency_b256.json"
  local -a offline=(bench offline "${common[@]}" --max-num-seqs "${MAX_NUM_SEQS:-0}"
                    --max-num-batched-tokens "${MAX_BATCHED:-0}"
                    --kv-cache-memory "${KV_MEMORY:-auto}")
  perf_step o128 200 "$inflight" "${offline[@]}" --max-model-len "${MAX_MODEL_LEN:-4096}" \
    --num-prompts "${PROMPTS_128:-4096}" --input-len 128 --output-len 128 \
    --result-json "$OUT/offline_128_128.json"
  perf_step o2048 300 "$inflight" "${offline[@]}" --max-model-len "${MAX_MODEL_LEN:-4096}" \
    --num-prompts "${PROMPTS_2048:-2048}" --input-len 2048 --output-len 128 \
    --result-json "$OUT/offline_2048_128.json"
  perf_step o1000 560 "$inflight" "${offline[@]}" --max-model-len "${MAX_MODEL_LEN:-4096}" \
    --num-prompts "${PROMPTS_1000:-2048}" --input-len 1000 --output-len 1000 \
    --result-json "$OUT/offline_1000_1000.json"
  if [[ ttft =~ ^(${PERF_ONLY:-.*})$ ]]; then
    "$inflight" serve "${common[@]}" --max-model-len "${MAX_MODEL_LEN:-4096}" --tokenizer "$vocab" --port 8124 \
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
    grep -E 'Copy bandwidth|Matrix rate|Decode floor|Prefill floor|Median decode step|Median TTFT|Output token throughput|Device idle|Preemptions|Elapsed time|Failed requests|TTFT \(ms\)' "$f" \
      | sed "s|^|$(basename "$f" .log): |"
  done
}

# serve_startup NAME BINARY DIR: launch to /health 200 and the peak RSS of `serve --model DIR`.
serve_startup() {
  local name="$1" bin="$2" dir="$3" vocab="$4" port=8125 begin end code server hwm
  begin=$(date +%s.%N)
  "$bin" serve --model "$dir" --tokenizer "$vocab" --port "$port" > "$OUT/logs/startup_$name.log" 2>&1 &
  server=$!
  for _ in $(seq 1 1200); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")
    [[ "$code" == 200 ]] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.05
  done
  end=$(date +%s.%N)
  hwm=$(awk '/VmHWM/ {print $2 / 1048576 " GiB"}' "/proc/$server/status" 2>/dev/null)
  kill -INT "$server" 2>/dev/null
  wait "$server"
  summary_rows+=("$(printf 'startup %-6s launch to /health %s: %.2f s, peak RSS %s' "$name" \
    "$code" "$(awk -v a="$begin" -v b="$end" 'BEGIN {print b - a}')" "${hwm:-?}")")
  grep -E 'loaded|engine ready|memory plan' "$OUT/logs/startup_$name.log" | cut -c1-400
}

run_startup() {
  local dir=/tmp/llama-3.1-8b-random vocab="$OUT/llama-bpe.gguf" begin end
  xz -dc "$stage_dir/data/ggml-vocab-llama-bpe.gguf.xz" > "$vocab"
  [[ -d "$dir" ]] || python3 dev/cuda/make_random_checkpoint.py "$dir" 2>&1 | tail -2
  cat "$dir"/*.safetensors > /dev/null  # into the page cache, as the target says
  serve_startup after "$stage_dir/bin/inflight" "$dir" "$vocab"
  [[ -x "$stage_dir/bin/inflight-base" ]] && serve_startup before "$stage_dir/bin/inflight-base" "$dir" "$vocab"
  local rc
  begin=$(date +%s.%N)
  python3 -c "import torch, transformers; m = transformers.AutoModelForCausalLM.from_pretrained('$dir', dtype=torch.bfloat16, device_map='cuda'); torch.cuda.synchronize()" \
    > "$OUT/logs/startup_transformers.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  summary_rows+=("$(printf 'startup transformers from_pretrained onto the GPU: %.2f s (python start and import included; rc %s)' \
    "$(awk -v a="$begin" -v b="$end" 'BEGIN {print b - a}')" "$rc")")
  rm -f "$vocab"
}

# layout_env LAYOUT / layout_split LAYOUT: a layout name, tp<T>[pp<P>] or pp<P> with an optional
# net_ prefix and an optional mb<D> suffix (--max-num-micro-batches D: pp2mb1 is PP=2 with one
# step in flight), as the environment to run under and the launch options. net_ keeps NCCL off
# peer-to-peer and shared memory and the one-shot all-reduce off, so every collective goes
# through NCCL's network transport, as between nodes.
layout_env() {
  [[ "$1" == net_* ]] && echo env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
    INFLIGHT_ONE_SHOT_ALL_REDUCE_MAX=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
    "NCCL_DEBUG_FILE=$OUT/logs/nccl_$1.%p.log"
}
layout_split() {
  local t=1 p=1
  [[ "$1" =~ tp([0-9]+) ]] && t="${BASH_REMATCH[1]}"
  [[ "$1" =~ pp([0-9]+) ]] && p="${BASH_REMATCH[1]}"
  echo --tensor-parallel-size "$t" --pipeline-parallel-size "$p"
  if [[ "$1" =~ mb([0-9]+) ]]; then echo --max-num-micro-batches "${BASH_REMATCH[1]}"; fi
}

run_parallel() {
  local inflight="$stage_dir/bin/inflight" vocab="$OUT/llama-bpe.gguf" n layout
  n="${TP:-$(nvidia-smi -L | wc -l)}"
  export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  local common=(--dummy-weights --arch "${ARCH:-llama-3.1-8b}" --device cuda --max-model-len "${MAX_MODEL_LEN:-4096}")
  [[ -n "${QUANT:-}" ]] && common+=(--quantization "$QUANT")
  [[ -n "${KV_DTYPE:-}" ]] && common+=(--kv-cache-dtype "$KV_DTYPE")
  # Layouts (layout_env, layout_split): one GPU, n tensor-parallel ranks, n pipeline stages, and from 4
  # GPUs on n/2 ranks x 2 stages, also through the network transport.
  local default_layouts="tp1 tp$n pp$n"
  ((n >= 4)) && default_layouts+=" tp$((n / 2))pp2 net_tp$((n / 2))pp2"
  local -a layouts
  read -r -a layouts <<< "${PAR_LAYOUTS:-$default_layouts}"
  xz -dc "$stage_dir/data/ggml-vocab-llama-bpe.gguf.xz" > "$vocab"
  printf '%s\n' '{"prompt": "The history of the Roman Empire", "max_tokens": 48, "temperature": 0, "ignore_eos": true, "logprobs": 2}' \
    '{"prompt": "def quicksort(xs):", "max_tokens": 48, "temperature": 0, "ignore_eos": true, "logprobs": 2}' \
    '{"prompt": "Tensor parallelism splits each layer", "max_tokens": 48, "temperature": 0, "ignore_eos": true, "logprobs": 2}' > "$OUT/prompts.jsonl"
  for layout in "${layouts[@]}"; do
    # Results (stdout) apart from the ranks' logs (stderr).
    perf_step "greedy_$layout" 300 bash -c '"$@" > "'"$OUT/greedy_$layout.jsonl"'"' _ \
      $(layout_env "$layout") "$inflight" generate "${common[@]}" $(layout_split "$layout") \
      --tokenizer "$vocab" \
      --prompts-file "$OUT/prompts.jsonl"
    [[ "$layout" == tp1 || ! -s "$OUT/greedy_$layout.jsonl" || ! -s "$OUT/greedy_tp1.jsonl" ]] && continue
    python3 dev/cuda/compare_greedy.py "$OUT/greedy_tp1.jsonl" "$OUT/greedy_$layout.jsonl" \
      > "$OUT/greedy_compare_$layout.txt"
    summary_rows+=("greedy $layout vs tp1 (rc $?):")
    while read -r line; do summary_rows+=("  $line"); done < "$OUT/greedy_compare_$layout.txt"
  done
  # The transport NCCL chose in the network layouts (its INFO lines).
  grep -shoE 'via NET/[A-Za-z]+' "$OUT"/logs/nccl_net_*.log | sort | uniq -c
  perf_step "collectives_tp$n" 240 "$inflight" bench collectives --ranks "$n" --device cuda \
    --result-json "$OUT/collectives_tp$n.json"
  [[ -f "$OUT/logs/collectives_tp$n.log" ]] && sed -n '/all-reduce on/,$p' "$OUT/logs/collectives_tp$n.log"
  for layout in "${layouts[@]}"; do
    # shellcheck disable=SC2046  # the layout's words
    perf_step "b1_$layout" 240 $(layout_env "$layout") "$inflight" bench latency "${common[@]}" \
      $(layout_split "$layout") \
      --batch-size 1 --input-len 128 --output-len 128 --num-iters 5 --num-iters-warmup 2 \
      --kv-cache-memory 0.5 --result-json "$OUT/latency_b1_$layout.json"
    grep -sE 'Median decode step' "$OUT/logs/b1_$layout.log" | sed "s|^|b1_$layout: |"
  done
  for layout in ${PAR_OFFLINE-${layouts[*]:1}}; do
    # shellcheck disable=SC2046  # the layout's words
    perf_step "o128_$layout" 300 $(layout_env "$layout") "$inflight" bench offline "${common[@]}" \
      $(layout_split "$layout") \
      --num-prompts "${PROMPTS_128:-4096}" --input-len 128 --output-len 128 \
      --result-json "$OUT/offline_128_128_$layout.json"
    grep -sE 'Output token throughput|Device idle' "$OUT/logs/o128_$layout.log" \
      | sed "s|^|o128_$layout: |"
  done
  rm -f "$vocab"
}

# Structured output on Llama-3.1-8B shapes: offline 256 requests 128/128, unconstrained and
# every request under bench/schemas/offline_records.json, alternating (twice each).
run_structured() {
  local inflight="$stage_dir/bin/inflight" vocab="$OUT/llama-bpe.gguf" i mode
  xz -dc "$stage_dir/data/ggml-vocab-llama-bpe.gguf.xz" > "$vocab"
  local common=(--dummy-weights --arch "${ARCH:-llama-3.1-8b}" --device cuda --tokenizer "$vocab"
                --num-prompts 256 --input-len 128 --output-len 128 --max-model-len 4096)
  for i in 1 2; do
    for mode in plain schema; do
      local extra=()
      [[ "$mode" == schema ]] && extra=(--json-schema @bench/schemas/offline_records.json)
      step "structured_${mode}_$i" 300 "$inflight" bench offline "${common[@]}" "${extra[@]}" \
        --result-json "$OUT/structured_${mode}_$i.json"
      grep -E 'Output token throughput|mask' "$OUT/logs/structured_${mode}_$i.log" \
        | sed "s|^|structured_${mode}_$i: |"
    done
  done
  rm -f "$vocab"
}

# Two models of a model repository sharing the GPU (dev/cuda/repository_split.py): shares taken,
# given back on unload, taken again on load, a share that does not fit refused.
run_repository() {
  step repository 420 python3 dev/cuda/repository_split.py --bin "$stage_dir/bin/inflight" \
    --model "$stage_dir/data/model.gguf" --work /tmp/repository_split \
    --result-json "$OUT/repository_split.json"
  grep -E '^(PASS|FAIL)' "$OUT/logs/repository.log"
}

run() {
  OUT="${OUT:-/tmp/device_run_out}"
  local what="${1:-all}"
  device_setup "$stage_dir" || exit 1
  [[ "$what" == tests || "$what" == all ]] && run_tests
  [[ "$what" == bench || "$what" == all ]] && run_bench
  [[ "$what" == perf ]] && run_perf
  [[ "$what" == startup ]] && run_startup
  [[ "$what" == parallel ]] && run_parallel
  [[ "$what" == structured ]] && run_structured
  [[ "$what" == repository ]] && run_repository
  finish_run "device run ($what)"
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 stage [BUILD_DIR] | run [tests|bench|perf|startup|parallel|structured|repository|all]"; exit 2 ;;
esac
