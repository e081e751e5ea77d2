#!/usr/bin/env bash
# Decode-step work on a GPU machine, in two halves (dev/cuda/device_lib.sh; staging dir
# .devrun-decode/, git-ignored):
#   dev/cuda/decode/device_run.sh stage [BUILD_DIR]   here: inflight, the CUDA tests and gemv_lab
#       (built in BUILD_DIR, default build-decode, by build_lab.sh), spdlog/fmt, SmolLM2 trimmed
#       to 4 blocks.
#   dev/cuda/decode/device_run.sh run [lab] [tests] [dummy] [bench]   on the GPU machine,
#       repository root, .devrun-decode/ carried: logs and the bench JSON in $OUT/run.tar.gz, a
#       summary table last.
set -u -o pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$repo"
source dev/cuda/device_lib.sh
stage_dir=.devrun-decode

stage() {
  local build="${1:-build-decode}"
  stage_begin "$stage_dir"
  mkdir -p "$stage_dir/data"
  dev/cuda/decode/build_lab.sh "$build" "$build/gemv_lab" || exit 1
  stage_binary "$stage_dir" "$build/bin/inflight" "$build/gemv_lab" \
    "$build"/tests/cuda/cuda_{serving,ops,model}_test || exit 1
  .venv/bin/python dev/cuda/trim_gguf.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
    "$stage_dir/data/model.gguf" 4 || exit 1
  stage_finish "$stage_dir"
}

run() {
  OUT="${OUT:-/tmp/decode_out}"
  device_setup "$stage_dir" || exit 1
  local bin="$stage_dir/bin" what
  for what in "$@"; do
    case "$what" in
      lab) step lab 60 "$bin/gemv_lab"; cat "$OUT/logs/lab.log" ;;
      tests)
        step serving 150 "$bin/cuda_serving_test"
        grep -E '^gemv|^gemm |dummy llama|batch (1|256) decode|copy bandwidth' \
          "$OUT/logs/serving.log" | head -30
        step ops 40 "$bin/cuda_ops_test"
        step model 40 env "INFLIGHT_CUDA_TEST_MODEL=$stage_dir/data/model.gguf" \
          "$bin/cuda_model_test" ;;
      dummy) step dummy 120 "$bin/cuda_serving_test" '--gtest_filter=*DummyLlama31_8B*'
        grep -E 'dummy llama|batch (1|256) decode|copy bandwidth' "$OUT/logs/dummy.log" ;;
      bench)
        step bench 90 "$bin/inflight" bench latency --dummy-weights --arch llama-3.1-8b \
          --device cuda --batch-size 1 --input-len 128 --output-len 128 --num-iters 5 \
          --num-iters-warmup 2 --max-model-len 4096 --kv-cache-memory 0.5 \
          --result-json "$OUT/latency_b1.json"
        sed -n '/=====/,/=====/p' "$OUT/logs/bench.log" ;;
    esac
  done
  finish_run "decode device run"
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 stage [BUILD_DIR] | run [lab] [tests] [dummy] [bench]"; exit 2 ;;
esac
