#!/usr/bin/env bash
# The Python package on a GPU machine whose Python differs from the build machine's (the GPU
# image's 3.12 against 3.11 here): the extension is compiled there from python/src against that
# Python, with nanobind's sources and the engine's static libraries built here, then
# bench/python_overhead.py compares LLM.generate with `inflight bench offline` on the GPU.
#
#   dev/cuda/python_module.sh stage [BUILD_DIR]   here: the `inflight` binary and the shared
#       libraries the image lacks (device_lib.sh), the static libraries the extension links
#       (read from BUILD_DIR's link line, default build), nanobind's C++ sources and the headers
#       the extension includes that the image lacks (nlohmann, fmt, spdlog), into $STAGE_DIR
#       (default .devrun-python, git-ignored): about 30 MB.
#   dev/cuda/python_module.sh run                 there, repository root, the staging directory
#       carried: builds inflight/_inflight.<abi>.so, runs the offline 128/128 comparison on dummy
#       Llama-3.1-8B shapes (PROMPTS, default 4096), results in $OUT.
# Run with carry [".devrun-python"]; the device needs a C++ compiler (the image's, beside nvcc).
set -u -o pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
source dev/cuda/device_lib.sh
stage_dir="${STAGE_DIR:-.devrun-python}"

# The static libraries of the extension's link line in BUILD's build.ninja, relative to BUILD.
extension_archives() {
  awk '/^build python\/_inflight[^:]*\.so:/ {f = 1} f && /LINK_LIBRARIES/ {print; exit}' \
    "$1/build.ninja" | tr ' ' '\n' | grep '\.a$' | awk '!seen[$0]++'
}

stage() {
  local build="${1:-build}" archives nb
  archives="$(extension_archives "$build")"
  [[ -n "$archives" ]] || { echo "no python/_inflight link line in $build/build.ninja"; exit 1; }
  nb="$(.venv/bin/python -c 'import nanobind, os; print(os.path.dirname(nanobind.__file__))')"
  stage_begin "$stage_dir"
  stage_binary "$stage_dir" "$build/bin/inflight" || exit 1
  # shellcheck disable=SC2086  # one archive per word
  tar -cf - -C "$build" $archives | xz -T2 > "$stage_dir/archives.tar.xz" || exit 1
  tar -cJf "$stage_dir/headers.tar.xz" -C /usr/include nlohmann fmt spdlog || exit 1
  tar -cJf "$stage_dir/nanobind.tar.xz" -C "$(dirname "$nb")" nanobind/include nanobind/src \
    nanobind/ext || exit 1
  stage_finish "$stage_dir"
}

# Compiles the extension into $1/inflight (the package copied from python/inflight).
build_extension() {
  local pkg="$1" work="/tmp/python_module" cxx py_include suffix
  cxx="$(command -v "${CXX:-g++}" || command -v c++)" || { echo "no C++ compiler"; return 1; }
  rm -rf "$work" && mkdir -p "$work/archives" "$work/include"
  tar -xJf "$stage_dir/archives.tar.xz" -C "$work/archives" &&
    tar -xJf "$stage_dir/headers.tar.xz" -C "$work/include" &&
    tar -xJf "$stage_dir/nanobind.tar.xz" -C "$work" || return 1
  py_include="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
  suffix="$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
  echo "$("$cxx" --version | head -1); Python headers $py_include; suffix $suffix"
  rm -rf "$pkg" && mkdir -p "$pkg" && cp -r python/inflight "$pkg/"
  local flags=(-std=c++20 -O3 -fPIC -fvisibility=hidden -DNDEBUG -DFMT_SHARED
               -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -Isrc -I. -Iinclude
               "-I$py_include" "-I$work/nanobind/include" "-I$work/nanobind/ext/robin_map/include"
               "-isystem$work/include" -isystem/usr/local/cuda/include)
  # nanobind's library in one translation unit, for this Python, and the extension's sources.
  local objs=() src
  for src in "$work/nanobind/src/nb_combined.cpp" python/src/*.cc; do
    objs+=("$work/$(basename "$src").o")
    "$cxx" "${flags[@]}" -c "$src" -o "${objs[-1]}" &
  done
  wait
  for src in "${objs[@]}"; do [[ -f "$src" ]] || return 1; done
  # The engine's archives in one group (the build here linked nanobind's own for its Python);
  # the shared libraries by the paths the binary resolves here (CUDA, cuBLASLt, Open MPI) and
  # the staged ones (spdlog, fmt, ...).
  local archives shared
  mapfile -t archives < <(find "$work/archives" -name '*.a' ! -name 'libnanobind*')
  mapfile -t shared < <(ldd "$stage_dir/bin/inflight" |
                        awk '/(libcudart|libcublasLt|libmpi)[.]so/ {print $3}')
  "$cxx" -shared -o "$pkg/inflight/_inflight$suffix" "${objs[@]}" \
    -Wl,--start-group "${archives[@]}" -Wl,--end-group "${shared[@]}" "$stage_dir"/lib/*.so* \
    -ldl -lpthread || return 1
  ls -la "$pkg/inflight/_inflight$suffix"
}

run() {
  OUT="${OUT:-/tmp/python_module_out}"
  device_setup "$stage_dir" || exit 1
  local pkg=/tmp/python_pkg
  build_extension "$pkg" > "$OUT/logs/build_extension.log" 2>&1
  local rc=$?
  summary_rows+=("build_extension rc=$rc")
  if [[ $rc -ne 0 ]]; then
    tail -30 "$OUT/logs/build_extension.log"
  else
    step python_import 60 env "PYTHONPATH=$pkg" python3 -c \
      'import inflight; print(inflight.__file__, inflight.LLM)'
    # The offline 128/128 setting of docs/benchmarks.md: both paths, alternating, twice.
    step python_overhead 560 env "PYTHONPATH=$pkg" "INFLIGHT_BIN=$stage_dir/bin/inflight" \
      PYTHONUNBUFFERED=1 python3 bench/python_overhead.py --dummy llama-3.1-8b --device cuda \
      --num-prompts "${PROMPTS:-4096}" --input-len 128 --output-len 128 --max-num-seqs 1024 \
      --max-num-batched-tokens 16384 --max-model-len 4096 --kv-cache-memory 0.9 --repeats 2 \
      --streams 0 --result-json "$OUT/python_overhead_cuda.json"
    tail -20 "$OUT/logs/python_overhead.log"
  fi
  finish_run "python module on the GPU"
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 stage [BUILD_DIR] | run"; exit 2 ;;
esac
