#!/usr/bin/env bash
# Installs what is missing, builds (CUDA compiled where nvcc exists, run only where a GPU is),
# and runs every test: CTest (unit, golden, end-to-end), the model-file loaders again under
# AddressSanitizer, short fuzz runs, the Python package (a wheel, installed into .venv), and the
# Python tests (real clients and oracles, tests/python for the package).
# Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${INFLIGHT_JOBS:-$(nproc)}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
export INFLIGHT_DATA_DIR=${INFLIGHT_DATA_DIR:-$root/../shared/data}
[ -d "$INFLIGHT_DATA_DIR" ] || echo "note: $INFLIGHT_DATA_DIR not found: data-driven tests will skip"

step() { printf '\n==== %s ====\n' "$*"; }

step "dependencies"
scripts/install_deps.sh
scripts/fetch_model.sh

step "build (Release)"
scripts/build.sh -DINFLIGHT_BUILD_TESTS=ON

step "ctest"
(cd build && ctest --output-on-failure -j "$jobs" --timeout 1500)

step "AddressSanitizer: model-file loaders and tokenizers on hostile input"
cmake -S . -B build-asan -G Ninja -DINFLIGHT_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DINFLIGHT_SANITIZE="address;undefined" >/dev/null
ninja -C build-asan -j "$jobs" asan_tests
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 \
  ctest --output-on-failure -j "$jobs" -L asan)

if command -v clang++ >/dev/null; then
  step "fuzz (short runs)"
  cmake -S . -B build-fuzz -G Ninja -DINFLIGHT_CUDA=OFF -DINFLIGHT_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
  ninja -C build-fuzz -j "$jobs" fuzz_targets
  (cd build-fuzz && ctest --output-on-failure -L fuzz)
fi

step "python package: wheel from build/ (only the extension module is compiled), installed into .venv"
# scikit-build-core configures build/ again with INFLIGHT_PYTHON=ON and builds just _inflight
# against the libraries built above; tests stay on for the next build.sh.
rm -rf build/wheels
.venv/bin/python -m pip wheel -q --no-build-isolation --no-deps -w build/wheels . \
  -C build-dir=build -C cmake.define.INFLIGHT_BUILD_TESTS=ON
.venv/bin/python -m pip install -q --no-deps --force-reinstall build/wheels/inflight-*.whl

step "python tests"
export INFLIGHT_BIN="$root/build/bin/inflight"
.venv/bin/python -m pytest -q tests || { rc=$?; [ $rc -eq 5 ] && echo "no python tests"; [ $rc -eq 5 ]; }
