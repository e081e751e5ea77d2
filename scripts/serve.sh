#!/usr/bin/env bash
# Installs what is missing, builds Release, fetches the default model and serves it with the
# OpenAI-compatible API on 127.0.0.1:8000. Extra arguments go to `inflight serve`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install_deps.sh
scripts/build.sh -DINFLIGHT_BUILD_TESTS=OFF
scripts/fetch_model.sh
bin="$root/build/bin/inflight"
if "$bin" serve --help >/dev/null 2>&1; then
  exec "$bin" serve --model models/SmolLM2-135M-Instruct.Q4_1.gguf --host 127.0.0.1 --port 8000 "$@"
fi
# Until the HTTP server is built, show the engine end to end on a demo prompt.
exec "$bin" generate --model models/SmolLM2-135M-Instruct.Q4_1.gguf \
  --prompt "The capital of France is" --max-tokens 32 --temperature 0
