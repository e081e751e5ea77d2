#!/usr/bin/env bash
# Builds gemv_lab against the CUDA ops of a build directory (default build-decode):
#   dev/cuda/decode/build_lab.sh [BUILD_DIR] [OUT]   (OUT default BUILD_DIR/gemv_lab)
set -eu
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
build="${1:-$repo/build-decode}"
out="${2:-$build/gemv_lab}"
nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a -DFMT_USE_CONSTEXPR=1 \
  -I"$repo/src" -I"$repo/include" "$repo/dev/cuda/decode/gemv_lab.cu" -o "$out" \
  "$build"/src/ops/CMakeFiles/inflight_ops_cuda.dir/{gemv,rms_norm,swiglu}_cuda.cu.o \
  "$build/src/ops/libinflight_ops_cuda.a" "$build/src/ops/libinflight_ops.a" \
  "$build/src/core/libinflight_core.a" -lspdlog -lfmt -lcublasLt
