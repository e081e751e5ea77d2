"""`inflight serve` on model files whose config or header lies: it exits non-zero at once with a
message naming what is wrong (never a crash, bad_alloc or an OOM later)."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, MODEL

TINY = Path(__file__).resolve().parents[1] / "golden" / "fixtures" / "tiny-llama"


def serve_error(model_dir):
    if not BIN.exists() or not MODEL.exists():
        pytest.skip("skipped: inflight or the default model (its tokenizer) is missing")
    proc = subprocess.run([str(BIN), "serve", "--model", str(model_dir), "--tokenizer", str(MODEL),
                           "--host", "127.0.0.1", "--port", "0", "--grpc-port", "0",
                           "--device", "cpu"],
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("key,value,named", [
    ("num_hidden_layers", 1_000_000_000, "num_hidden_layers"),
    ("num_hidden_layers", 10**13, "num_hidden_layers"),
    ("hidden_size", 10**12, "hidden_size"),
    ("vocab_size", 2**40, "vocab_size"),
    ("intermediate_size", -5, "intermediate_size"),
])
def test_absurd_config_is_refused_by_name(tmp_path, key, value, named):
    shutil.copytree(TINY, tmp_path / "m")
    config_path = tmp_path / "m" / "config.json"
    config = json.loads(config_path.read_text())
    config[key] = value
    config_path.write_text(json.dumps(config))
    rc, out = serve_error(tmp_path / "m")
    assert rc != 0, out
    assert named in out, out
    assert "bad_alloc" not in out and ".cc:" not in out, out


def test_truncated_weights_are_refused_by_name(tmp_path):
    shutil.copytree(TINY, tmp_path / "m")
    weights = tmp_path / "m" / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:len(data) - 64])
    rc, out = serve_error(tmp_path / "m")
    assert rc != 0, out
    assert "model.safetensors" in out, out
