"""`inflight eval` as a program on the CPU backend and the default model, with tiny settings
(2 windows of 24 tokens; CI has 2 cores): the reference against itself has KL 0 and full
top-1 agreement, each FP8 mode a small positive KL and a finite perplexity near the
reference's, and the result JSON validates against bench/results.schema.json. Bad flags fail
with a message naming what to fix.

Needs $INFLIGHT_BIN (build/bin/inflight) and the default model; skips, saying why, without them.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "bench"))
import schema_check  # noqa: E402

BIN = Path(os.environ.get("INFLIGHT_BIN", ROOT / "build" / "bin" / "inflight"))
MODEL = Path(os.environ.get("INFLIGHT_TEST_MODEL",
                            ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
TEXT = ROOT / "bench" / "eval" / "alice_ch1-2.txt"
SCHEMA = json.loads((ROOT / "bench" / "results.schema.json").read_text())


def require(path, what):
    if not path.exists():
        pytest.skip(f"skipped: {what} {path} not found")


def run_eval(*args, timeout=600):
    require(BIN, "binary")
    require(MODEL, "default model")
    return subprocess.run([str(BIN), "eval", "--device", "cpu", "--model", str(MODEL), *args],
                          capture_output=True, text=True, timeout=timeout)


def test_modes_against_the_reference(tmp_path):
    out = tmp_path / "eval.json"
    proc = run_eval("--text", str(TEXT), "--context", "24", "--max-windows", "2", "--modes",
                    "base,fp8-tensor,fp8-channel,fp8-block", "--result-json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    problems = schema_check.errors(result, SCHEMA)
    assert not problems, "\n".join(problems[:20])

    assert result["backend"] == "cpu" and result["compute_dtype"] == "f32"
    assert result["windows"] == 2 and result["context"] == 24
    assert result["tokens_per_mode"] == 2 * 23
    ref = result["reference"]
    assert ref["tokens"] == 46
    assert math.isfinite(ref["perplexity"]) and 1 < ref["perplexity"] < 1000
    assert ref["mean_kl"] == 0 and ref["top1_agreement"] == 1

    modes = {m["name"]: m for m in result["modes"]}
    assert list(modes) == ["base", "fp8-tensor", "fp8-channel", "fp8-block"]
    base = modes["base"]  # the same weights run again: bit for bit the reference
    assert base["mean_kl"] == 0 and base["max_kl"] == 0 and base["top1_agreement"] == 1
    assert base["perplexity"] == ref["perplexity"]
    for name in ("fp8-tensor", "fp8-channel", "fp8-block"):
        m = modes[name]
        assert m["quantization"] == name and m["tokens"] == 46, m
        assert 0 < m["mean_kl"] < 0.2, m  # quantized, but still the same model
        assert m["max_kl"] >= m["mean_kl"], m
        assert math.isfinite(m["perplexity"]), m
        assert abs(math.log(m["perplexity"] / ref["perplexity"])) < 0.2, m
        assert m["top1_agreement"] > 0.6, m
    # The table names every mode.
    for name in modes:
        assert name in proc.stdout


def test_bad_flags_are_explained():
    proc = run_eval("--modes", "fp8-row", "--max-windows", "1")
    assert proc.returncode == 1
    assert "unknown weights 'fp8-row'" in proc.stderr and "fp8-block" in proc.stderr
    proc = run_eval("--text", str(TEXT), "--context", "100000", "--max-windows", "1",
                    "--modes", "fp8-channel")
    assert proc.returncode == 1
    assert "--context" in proc.stderr, proc.stderr


def test_fp8_kv_cache_modes(tmp_path):
    # An e4m3 KV cache alone, and under FP8 weights: every attention read goes through the
    # cache, so a window's prefill already shows the cache's rounding.
    out = tmp_path / "eval_kv.json"
    proc = run_eval("--text", str(TEXT), "--context", "24", "--max-windows", "2", "--modes",
                    "kv-fp8,fp8-channel,fp8-channel+kv-fp8", "--result-json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    modes = {m["name"]: m for m in json.loads(out.read_text())["modes"]}
    assert list(modes) == ["base+kv-fp8", "fp8-channel", "fp8-channel+kv-fp8"]
    kv_only = modes["base+kv-fp8"]
    assert 0 < kv_only["mean_kl"] < 0.2, kv_only
    assert kv_only["top1_agreement"] > 0.6, kv_only
    both = modes["fp8-channel+kv-fp8"]
    assert 0 < both["mean_kl"] < 0.3 and math.isfinite(both["perplexity"]), both
    assert both["mean_kl"] != modes["fp8-channel"]["mean_kl"]  # the cache's dtype took effect
