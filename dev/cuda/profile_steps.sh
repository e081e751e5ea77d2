#!/usr/bin/env bash
# ncu per-kernel summaries (duration per kernel and launch shape) of one 128-token prefill, of a
# prefill step of two 2,048-token prompts (the GEMMs at m = 4,096 of offline 2048/128) and of
# decode steps at batch 256, Llama-3.1-8B dummy weights, from the binaries that
# dev/cuda/device_run.sh staged. On the GPU machine, repository root, the staging directory
# carried:   bash dev/cuda/profile_steps.sh        (STAGE_DIR, default .devrun-serving)
# Reports in $OUT/run.tar.gz; the condensed per-kernel lines are printed.
set -u -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source dev/cuda/device_lib.sh
stage_dir="${STAGE_DIR:-.devrun-serving}"
OUT="${OUT:-/tmp/profile_out}"
device_setup "$stage_dir" || exit 1
[[ -n "$NCU" ]] || { echo "ncu not found"; exit 1; }
latency=("$stage_dir/bin/inflight" bench latency --dummy-weights --arch llama-3.1-8b --device cuda
         --max-model-len 4096 --kv-cache-memory 0.5 --num-iters-warmup 0 --num-iters 1)

profile() {
  local name="$1"
  shift
  step "$name" 240 "$NCU" --clock-control none --metrics gpu__time_duration.sum \
    --print-summary per-kernel "${latency[@]}" "$@"
  echo "== $name"
  grep -E '^  [A-Za-z_].*\(|gpu__time_duration.sum' "$OUT/logs/$name.log" \
    | sed -E 's/\(inflight::[A-Za-z]+Params\)//; s/, Context.*//; s/ +/ /g' | paste - - \
    | cut -c1-150 | grep -v fill_random
}

profile prefill_128 --batch-size 1 --input-len 128 --output-len 1
profile prefill_4096 --batch-size 2 --input-len 2048 --output-len 1 --max-num-batched-tokens 8192
profile decode_256 --batch-size 256 --input-len 128 --output-len 3 --max-num-seqs 256 \
  --max-num-batched-tokens 8192
finish_run "profile"
