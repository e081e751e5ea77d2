#!/usr/bin/env bash
# Installs what building, testing and serving need, skipping what is already there:
# Debian 12 packages (apt) and a Python virtual environment in .venv (PyPI) for the test oracles
# and clients. Safe to run repeatedly.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

apt_packages=(
  build-essential cmake ninja-build ccache pkg-config git xz-utils unzip curl
  libboost1.81-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libpcre2-dev
  libgtest-dev python3 python3-venv python3-pip
  python3-dev                # headers for the Python extension module (pyproject.toml)
  clang libclang-rt-14-dev   # libFuzzer and sanitizer runtimes for the fuzz targets
  prometheus                 # promtool, to check the /metrics exposition format
  libopenmpi-dev openmpi-bin # MPI: launches the ranks of tensor/pipeline parallelism
  chromium chromium-driver   # headless browser for the playground's test (tests/e2e/test_playground.py)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc  # KServe v2 gRPC
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install_deps: apt-get install ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# Python: a venv keeps the system interpreter untouched (Debian marks it externally managed).
if [ ! -x "$root/.venv/bin/python" ]; then
  python3 -m venv "$root/.venv"
fi
stamp="$root/.venv/.requirements.sha"
want=$(sha256sum "$root/scripts/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$root/.venv/bin/python" -m pip install -q --disable-pip-version-check \
    -r "$root/scripts/requirements.txt"
  echo "$want" > "$stamp"
fi

# XGrammar's C++ core (Apache-2.0), the grammar engine of structured output: its sources ship in
# the PyPI sdist; CMake builds what src/grammar needs of them (cmake/xgrammar.cmake).
xgrammar_version=0.2.8
xgrammar_sha256=8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80
xgrammar_url=https://files.pythonhosted.org/packages/03/0f/29f521535729be740779c2c98b630ef6607cf28be9b669895dd2b821ff63/xgrammar-$xgrammar_version.tar.gz
xgrammar_dir="$root/.deps/xgrammar-$xgrammar_version"
if [ ! -f "$xgrammar_dir/include/xgrammar/xgrammar.h" ]; then
  mkdir -p "$root/.deps"
  tarball="$root/.deps/xgrammar-$xgrammar_version.tar.gz"
  curl -fsSL -o "$tarball" "$xgrammar_url"
  echo "$xgrammar_sha256  $tarball" | sha256sum -c --quiet
  tar -xzf "$tarball" -C "$root/.deps"
  rm -f "$tarball"
fi
