"""FP8 checkpoints end to end: tools/make_fp8_checkpoints.py writes a tiny random Llama in each
layout (compressed-tensors FP8_DYNAMIC and FP8 + KV-cache scheme, native block fp8, ModelOpt)
into a temporary directory and checks every dequantised weight against the bf16 original; then
`inflight generate` opens each directory on the CPU, and its greedy tokens must equal those of
fp32 transformers on the dequantised weights (reference.json, written by the script).

The script needs torch, transformers, safetensors, tokenizers and compressed-tensors, which the
project venv does not carry (torch alone is gigabytes): set $INFLIGHT_FP8_PYTHON to an
interpreter that has them, else this module skips, saying why. The binary is $INFLIGHT_BIN, else
<repo>/build/bin/inflight; the generate tests skip without it.

Run: INFLIGHT_FP8_PYTHON=/path/to/venv/bin/python .venv/bin/python -m pytest tests/model
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("INFLIGHT_BIN", REPO / "build" / "bin" / "inflight"))
SCRIPT = REPO / "tools" / "make_fp8_checkpoints.py"
PYTHON = os.environ.get("INFLIGHT_FP8_PYTHON", sys.executable)
LAYOUTS = ["ct-fp8-dynamic", "ct-fp8-static", "fp8-block", "modelopt"]
MODULES = "torch, transformers, safetensors, tokenizers, compressed_tensors"


def _missing_modules():
    probe = subprocess.run([PYTHON, "-c", f"import {MODULES}"], capture_output=True, text=True)
    return None if probe.returncode == 0 else probe.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    missing = _missing_modules()
    if missing:
        pytest.skip(f"skipped: {PYTHON} cannot import {MODULES} ({missing}); set "
                    "INFLIGHT_FP8_PYTHON to an interpreter that can")
    out = tmp_path_factory.mktemp("fp8")
    run = subprocess.run([PYTHON, str(SCRIPT), str(out), "--check"], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    for layout in LAYOUTS:
        assert f"wrote {out / layout} (checked 14 FP8 weights)" in run.stdout, run.stdout
    return out


def test_layout_files(checkpoints):
    for layout in LAYOUTS:
        d = checkpoints / layout
        assert (d / "model.safetensors").is_file() and (d / "tokenizer.json").is_file()
        config = json.loads((d / "config.json").read_text())
        qc = config.get("quantization_config")
        if layout == "modelopt":
            assert qc is None  # the loader finds hf_quant_config.json on its own
            quant = json.loads((d / "hf_quant_config.json").read_text())["quantization"]
            assert quant["quant_algo"] == "FP8" and quant["kv_cache_quant_algo"] == "FP8"
        elif layout == "fp8-block":
            assert qc["quant_method"] == "fp8" and qc["weight_block_size"] == [128, 128]
        else:
            assert qc["quant_method"] == "compressed-tensors"
            assert (qc["kv_cache_scheme"] is not None) == (layout == "ct-fp8-static")


MIN_MARGIN = 1e-3  # greedy steps closer than this between top-1 and top-2 are not compared


def _agrees(got, want, margins):
    """Whether `got` equals `want` up to the first step too close to call."""
    for i, (g, w) in enumerate(zip(got, want)):
        if margins[i] < MIN_MARGIN:
            return True
        if g != w:
            return False
    return len(got) == len(want)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_inflight_generates_the_reference(checkpoints, layout, tmp_path):
    """inflight's greedy tokens on the CPU equal transformers' on the dequantised weights, with
    activations unquantized or rounded to e4m3 as the layout scales them (which one the CPU
    backend does is the model layer's business; either shows the weights were read right)."""
    if not BIN.exists():
        pytest.skip(f"skipped: {BIN} not built")
    d = checkpoints / layout
    cases = json.loads((d / "reference.json").read_text())["cases"]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(
        json.dumps({"prompt_token_ids": c["prompt_token_ids"],
                    "max_tokens": len(c["fp8_activations"]), "temperature": 0,
                    "ignore_eos": True}) + "\n" for c in cases))
    run = subprocess.run(
        [str(BIN), "generate", "--model", str(d), "--device", "cpu", "--prompts-file",
         str(requests), "--max-model-len", "128", "--kv-cache-memory", "16MiB"],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"stdout: {run.stdout[-2000:]}\nstderr: {run.stderr[-4000:]}"
    results = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(cases), run.stdout
    for r, c in zip(results, cases):
        got = r["token_ids"]
        assert any(_agrees(got, c[k], c[k + "_margins"])
                   for k in ("dequantized_weights", "fp8_activations")), (
            f"{layout}: prompt {c['prompt_token_ids']}: inflight {got}, transformers "
            f"{c['dequantized_weights']} (activations unquantized) / {c['fp8_activations']} "
            "(fp8 activations)")
