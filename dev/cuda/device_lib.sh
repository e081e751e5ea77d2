# The shared halves of the device-run scripts in dev/cuda (sourced, from the repository root):
# staging binaries here, on the build machine, and running them on the GPU machine, where the
# staging directory arrives through the device tool's `carry`.
#
#   stage_begin DIR                 an empty staging directory, ignored by git
#   stage_binary DIR FILE...        stripped copies into DIR/bin
#   build_lab DIR SRC NAME BUILD    a lab program (dev/cuda/*/*.cu, one file) linked against
#                                   BUILD's libraries, into DIR/bin/NAME
#   stage_finish DIR                the shared libraries the GPU image lacks (spdlog, fmt, gRPC),
#                                   bin/ and lib/ compressed (a run carries at most 64 MiB), the
#                                   commit
#   device_setup DIR                on the GPU machine: unpacks bin/ and lib/, sets LD_LIBRARY_PATH and
#                                   INFLIGHT_SOURCE_COMMIT, prints the device; needs $OUT
#   step NAME LIMIT COMMAND...      runs COMMAND with a time limit, its log in $OUT/logs/NAME.log;
#                                   prints failures and adds a row to the summary
#   finish_run TITLE                packs $OUT into one archive, $OUT/run.tar.gz (a run returns
#                                   at most 8 files), and prints the summary rows

stage_begin() {
  local dir="$1" info
  info="$(git rev-parse --git-common-dir)/info"
  mkdir -p "$info"
  grep -qx "/$dir/" "$info/exclude" 2>/dev/null || echo "/$dir/" >> "$info/exclude"
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/lib"
}

stage_binary() {
  local dir="$1" f
  shift
  for f in "$@"; do
    cp "$f" "$dir/bin/" || { echo "missing $f"; return 1; }
    strip --strip-debug "$dir/bin/$(basename "$f")"
  done
}

build_lab() {
  local dir="$1" src="$2" name="$3" build="$4"
  /usr/local/cuda/bin/nvcc -DFMT_SHARED -DFMT_USE_CONSTEXPR=1 -DSPDLOG_COMPILED_LIB \
    -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -I. -Isrc -Iinclude -O3 -DNDEBUG \
    --expt-relaxed-constexpr -lineinfo -std=c++20 \
    --generate-code=arch=compute_90a,code=[sm_90a] "$src" -o "$dir/bin/$name" \
    "$build/src/ops/libinflight_ops_cuda.a" "$build/src/ops/libinflight_ops.a" \
    "$build/src/core/libinflight_core.a" -lspdlog -lfmt -lcublasLt || return 1
  strip --strip-debug "$dir/bin/$name"
}

stage_finish() {
  local dir="$1"
  ldd "$dir"/bin/* | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libstdc++*|libgcc_s*|libdl.so*|libpthread*|librt.so*|ld-linux*) ;;
      libcuda*|libcublas*|libcudart*|libnccl*) ;;
      # MPI comes with the GPU machines' own Open MPI (its mpirun must match its libraries).
      libmpi*|libopen-rte*|libopen-pal*|libhwloc*|libevent*|libudev*|libz.so*) ;;
      *) cp -L "$path" "$dir/lib/$name" ;;
    esac
  done
  # One xz stream with a window over every binary and library: the binaries share most of their
  # code and kernels.
  tar -cf - -C "$dir" bin lib | xz -T2 --lzma2=preset=6,dict=256MiB > "$dir/bin.tar.xz" &&
    rm -rf "$dir/bin" "$dir/lib"
  { git rev-parse HEAD; git status --porcelain --untracked-files=no | head -1; } \
    | awk 'NR == 1 {c = $0} NR == 2 {c = c "+dirty"} END {print c}' > "$dir/commit.txt"
  du -sh "$dir"
}

find_cuda_libs() {
  local d
  for d in ${CUDA_LIB_DIR:-} /usr/local/cuda/lib64 /usr/local/cuda/lib \
           /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu \
           /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib \
           /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib; do
    if [[ -e "$d/libcublasLt.so.13" ]]; then
      echo "$d"
      return
    fi
  done
}

# The directory of libnccl.so.2 (opened at run time by tensor parallelism on CUDA).
find_nccl() {
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu \
           /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib \
           /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib; do
    if [[ -e "$d/libnccl.so.2" ]]; then
      echo "$d"
      return
    fi
  done
}

device_setup() {
  local dir="$1" libs nccl
  mkdir -p "$OUT/logs"
  [[ -d "$dir/bin" ]] || tar -xJf "$dir/bin.tar.xz" -C "$dir"
  libs="$(find_cuda_libs)"
  nccl="$(find_nccl)"
  [[ -n "$nccl" && "$nccl" != "$libs" ]] && libs="$libs${libs:+:}$nccl"
  export LD_LIBRARY_PATH="$PWD/$dir/lib${libs:+:$libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  INFLIGHT_SOURCE_COMMIT="$(cat "$dir/commit.txt" 2>/dev/null)"  # into every result JSON
  export INFLIGHT_SOURCE_COMMIT
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader \
    | tee "$OUT/device.txt"
  echo "commit $INFLIGHT_SOURCE_COMMIT; cuBLASLt from ${libs:-the system default}"
  if ldd "$dir"/bin/* | grep 'not found'; then
    echo "missing shared libraries"
    return 1
  fi
  SANITIZER="$(command -v compute-sanitizer ||
               ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)"
  NCU="$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu \
         2>/dev/null | head -1)"
  # NO_TOOLS=1: tests without compute-sanitizer and the ncu profile (a quicker pass).
  [[ -n "${NO_TOOLS:-}" ]] && SANITIZER="" NCU=""
  export SANITIZER NCU
}

declare -a summary_rows=()

step() {
  local name="$1" limit="$2"
  shift 2
  local log="$OUT/logs/$name.log" start end rc
  start=$(date +%s)
  echo "=== $name: $*"
  timeout "$limit" "$@" > "$log" 2>&1
  rc=$?
  end=$(date +%s)
  local passed failed skipped sanitizer
  passed=$(grep -m1 -o '\[  PASSED  \] [0-9]* test' "$log" | grep -o '[0-9]*' || true)
  failed=$(grep -m1 -o '[0-9]* FAILED TEST' "$log" | grep -o '^[0-9]*' || true)
  skipped=$(grep -m1 -o '\[  SKIPPED \] [0-9]* test' "$log" | grep -o '[0-9]*' || true)
  sanitizer=$(grep -m1 -oE '(ERROR|RACECHECK) SUMMARY: [0-9]* (error|hazard)' "$log" || true)
  grep -E '^\[  FAILED  \]|MISMATCH|Failure|========= [A-Z]|error:' "$log" | sort | uniq -c \
    | sort -rn | head -12
  summary_rows+=("$(printf '%-26s rc=%-4s %4ss  passed=%-3s failed=%-3s skipped=%-3s %s' "$name" \
    "$rc" "$((end - start))" "${passed:-0}" "${failed:-0}" "${skipped:-0}" "$sanitizer")")
}

finish_run() {
  local entries
  entries=$(cd "$OUT" && ls -A | grep -vx run.tar.gz)
  # shellcheck disable=SC2086  # names without spaces, made by these scripts
  tar -czf "$OUT/run.tar.gz" -C "$OUT" $entries && (cd "$OUT" && rm -rf $entries)
  echo
  echo "== $1 summary =="
  printf '%s\n' "${summary_rows[@]}"
}
