#!/usr/bin/env bash
# ncu per-kernel summaries (duration per kernel and launch shape, graph nodes one by one) of
# steps of `inflight bench latency` on dummy weights, from the binaries that
# dev/cuda/device_run.sh staged: decode_1 (batch-1 decode steps), prefill_128 (one 128-token
# prefill), prefill_4096 (two 2,048-token prompts: the GEMMs at m = 4,096 of offline 2048/128)
# and decode_256 (decode steps at batch 256). On the GPU machine, repository root, the staging
# directory carried:   bash dev/cuda/profile_steps.sh
# Environment: STEPS (default "prefill_128 prefill_4096 decode_256"), ARCH (llama-3.1-8b),
# MAX_MODEL_LEN (4096), QUANT and KV_DTYPE (--quantization, --kv-cache-dtype), STAGE_DIR,
# DECODE_INPUT_LEN (decode_256's prompt length, default 128; 1 makes its prefill a 256-token step
# too, so that every step profiled has 256 tokens).
# Reports in $OUT/run.tar.gz; the condensed per-kernel lines are printed.
set -u -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source dev/cuda/device_lib.sh
stage_dir="${STAGE_DIR:-.devrun-serving}"
OUT="${OUT:-/tmp/profile_out}"
device_setup "$stage_dir" || exit 1
[[ -n "$NCU" ]] || { echo "ncu not found"; exit 1; }
latency=("$stage_dir/bin/inflight" bench latency --dummy-weights --arch "${ARCH:-llama-3.1-8b}"
         --device cuda --max-model-len "${MAX_MODEL_LEN:-4096}" --kv-cache-memory 0.5
         --num-iters-warmup 0 --num-iters 1)
[[ -n "${QUANT:-}" ]] && latency+=(--quantization "$QUANT")
[[ -n "${KV_DTYPE:-}" ]] && latency+=(--kv-cache-dtype "$KV_DTYPE")

profile() {
  local name="$1"
  shift
  [[ " ${STEPS:-prefill_128 prefill_4096 decode_256} " == *" $name "* ]] || return 0
  step "$name" 240 "$NCU" --clock-control none --cache-control none --graph-profiling node \
    --metrics gpu__time_duration.sum --print-summary per-kernel "${latency[@]}" "$@"
  echo "== $name"
  grep -E '^  [A-Za-z_].*\(|gpu__time_duration.sum' "$OUT/logs/$name.log" \
    | sed -E 's/\(inflight::[A-Za-z]+Params\)//; s/, Context.*//; s/ +/ /g' | paste - - \
    | cut -c1-150 | grep -v fill_random
}

profile decode_1 --batch-size 1 --input-len 128 --output-len 9
profile prefill_128 --batch-size 1 --input-len 128 --output-len 1
profile prefill_4096 --batch-size 2 --input-len 2048 --output-len 1 --max-num-batched-tokens 8192
profile decode_256 --batch-size 256 --input-len "${DECODE_INPUT_LEN:-128}" --output-len 3 --max-num-seqs 256 \
  --max-num-batched-tokens 8192
finish_run "profile"
