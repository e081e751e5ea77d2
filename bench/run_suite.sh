#!/usr/bin/env bash
# The standard measurements of one engine build on one device, written to bench/results/:
#   offline   all requests queued at once: output tokens/s
#   latency   a fixed batch: TTFT and decode step latency
#   serve     `inflight serve` under `inflight bench serve` (random prompts, capped concurrency)
#
#   bench/run_suite.sh [TAG=cpu] [SIZE=small|full]
#
# SIZE=small fits a 2-core CPU machine in a few minutes; full is the same set at real sizes (on
# a GPU, dev/cuda/device_run.sh runs the Llama-3.1-8B figures). Environment:
# INFLIGHT_BIN (default build/bin/inflight), MODEL (default: the default model).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${INFLIGHT_BIN:-$root/build/bin/inflight}
model=${MODEL:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}
tag=${1:-cpu}
size=${2:-small}
day=$(date -u +%Y%m%d)
out=$root/bench/results
mkdir -p "$out"

if [ "$size" = small ]; then
  offline=(--num-prompts 16 --input-len 64 --output-len 32)
  latency=(--batch-size 4 --input-len 32 --output-len 32 --num-iters 3)
  serve=(--num-prompts 16 --random-input-len 64 --random-output-len 32 --max-concurrency 8)
  engine=(--kv-cache-memory 256MiB)
else
  offline=(--num-prompts 1000 --input-len 1024 --output-len 128)
  latency=(--batch-size 8 --input-len 128 --output-len 128 --num-iters 5)
  serve=(--num-prompts 1000 --random-input-len 1024 --random-output-len 128 --request-rate 16)
  engine=()
fi
name=$(basename "$model" .gguf)

"$bin" bench offline --model "$model" "${offline[@]}" "${engine[@]}" \
  --result-json "$out/offline_${name}_${tag}_${day}.json"
"$bin" bench latency --model "$model" "${latency[@]}" "${engine[@]}" \
  --result-json "$out/latency_${name}_${tag}_${day}.json"

log=$(mktemp)
"$bin" serve --model "$model" --host 127.0.0.1 --port 0 > "$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$log"' EXIT
port=""
for _ in $(seq 600); do
  port=$(grep -oE 'listening on [0-9.]+:[0-9]+' "$log" | head -1 | grep -oE '[0-9]+$' || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; exit 1; }
"$bin" bench serve --base-url "http://127.0.0.1:$port" "${serve[@]}" --ignore-eos \
  --num-warmups 1 --no-progress --result-json "$out/serve_${name}_${tag}_${day}.json"
