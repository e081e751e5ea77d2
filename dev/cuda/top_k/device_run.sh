#!/usr/bin/env bash
# top_k_logits device run, in two halves (the scheme of dev/cuda/README.md):
#
#   dev/cuda/top_k/device_run.sh stage [BUILD_DIR]   here: builds the lab bench against
#       BUILD_DIR's libraries (default build-topk, configured with INFLIGHT_CUDA=ON and
#       cuda_serving_test built) and stages it with cuda_serving_test into .devrun-top-k/
#       (git-ignored; dev/cuda/device_lib.sh).
#   dev/cuda/top_k/device_run.sh run                 on the GPU machine, repository root,
#       .devrun-top-k carried: the top-k tests, compute-sanitizer (memcheck, racecheck, synccheck,
#       initcheck) on the small one, the bench; logs in $OUT/run.tar.gz, a pass/fail table last.
set -u -o pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$repo"
source dev/cuda/device_lib.sh
stage_dir=.devrun-top-k

stage() {
  local build="${1:-build-topk}"
  stage_begin "$stage_dir"
  stage_binary "$stage_dir" "$build/tests/cuda/cuda_serving_test" || exit 1
  build_lab "$stage_dir" dev/cuda/top_k/bench.cu top_k_bench "$build" || exit 1
  stage_finish "$stage_dir"
}

run() {
  OUT="${OUT:-/tmp/top_k_run_out}"
  device_setup "$stage_dir" || exit 1
  local bin="$stage_dir/bin" tool
  step tests 300 "$bin/cuda_serving_test" '--gtest_filter=*TopK*'
  if [[ -n "$SANITIZER" ]]; then
    for tool in memcheck racecheck synccheck initcheck; do
      step "$tool" 300 "$SANITIZER" --tool "$tool" --error-exitcode 99 \
        "$bin/cuda_serving_test" '--gtest_filter=*TopKLogitsMatchesTheCpu'
    done
  fi
  step bench 300 "$bin/top_k_bench"
  echo
  sed -n '/== CUDA vs CPU summary/,$p' "$OUT/logs/tests.log" | head -8
  cat "$OUT/logs/bench.log"
  finish_run "top-k device run"
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  run) run ;;
  *) echo "usage: $0 stage [BUILD_DIR] | run"; exit 2 ;;
esac
