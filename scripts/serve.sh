#!/usr/bin/env bash
# Installs what is missing, builds Release, fetches the default model and serves it with the
# OpenAI-compatible API on 127.0.0.1:8000. Arguments go to `inflight serve`
# (e.g. scripts/serve.sh --port 8001, or scripts/serve.sh path/to/model.gguf).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install_deps.sh
scripts/build.sh -DINFLIGHT_BUILD_TESTS=OFF
scripts/fetch_model.sh
# The defaults come first: the caller's arguments (`--port 8001`, a model path, any serve flag)
# override them. Without a model argument the default model fetched above is served.
exec "$root/build/bin/inflight" serve --host 127.0.0.1 --port 8000 "$@"
