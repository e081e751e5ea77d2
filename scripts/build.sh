#!/usr/bin/env bash
# Configures and builds into build/ (Release). CUDA sources are compiled when nvcc is present.
#   scripts/build.sh [extra cmake args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${INFLIGHT_BUILD_DIR:-$root/build}
jobs=${INFLIGHT_JOBS:-$(nproc)}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
# Paths relative to the checkout, so ccache hits survive a clone to another directory.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C "$build" -j "$jobs"
