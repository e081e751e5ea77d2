#!/usr/bin/env bash
# Measures the benchmark client itself: `inflight bench serve` drives STREAMS concurrent SSE
# streams on loopback against the synthetic server (tests/bench/inflight_mock_sse_server), and
# reports the client's own CPU time (its thread's getrusage) per request and as a fraction of
# one core. A client that needs less than one core for the load does not limit the measurement.
#
#   bench/client_load.sh [STREAMS=2000] [CHUNKS=50] [INTERVAL_US=50000] [OUT=bench/results/...]
#
# Each stream carries CHUNKS token chunks INTERVAL_US apart (plus usage and [DONE]).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${INFLIGHT_BIN:-$root/build/bin/inflight}
mock=$(dirname "$bin")/inflight_mock_sse_server
streams=${1:-2000}
chunks=${2:-50}
interval_us=${3:-50000}
out=${4:-$root/bench/results/client_load_${streams}x${chunks}_$(date -u +%Y%m%d).json}

"$mock" --chunks "$chunks" --interval-us "$interval_us" > /tmp/inflight_mock_port.$$ &
mock_pid=$!
trap 'kill $mock_pid 2>/dev/null || true; rm -f /tmp/inflight_mock_port.$$' EXIT
for _ in $(seq 100); do
  [ -s /tmp/inflight_mock_port.$$ ] && break
  sleep 0.05
done
port=$(awk '{print $2}' /tmp/inflight_mock_port.$$)

"$bin" bench serve --base-url "http://127.0.0.1:$port" --num-prompts "$streams" \
  --max-concurrency "$streams" --request-rate inf --random-input-len 16 \
  --random-output-len "$chunks" --no-progress --result-json "$out"
