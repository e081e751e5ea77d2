"""`inflight bench` as a program: each mode's result JSON validates against
bench/results.schema.json, against the synthetic SSE server and against `inflight serve` on the
default model; Ctrl-C prints what was measured. Small sizes: CI has 2 cores and the CPU backend.

Needs $INFLIGHT_BIN (build/bin/inflight) and the inflight_mock_sse_server built beside it; the
runs on the engine need the default model. Each test skips, saying why, without them.
"""

import json
import lzma
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

import schema_check

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("INFLIGHT_BIN", ROOT / "build" / "bin" / "inflight"))
MOCK = BIN.parent / "inflight_mock_sse_server"
MODEL = Path(os.environ.get("INFLIGHT_TEST_MODEL",
                            ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
DATA = Path(os.environ.get("INFLIGHT_DATA_DIR", ROOT.parent / "shared" / "data"))
SCHEMA = json.loads((ROOT / "bench" / "results.schema.json").read_text())


def validate(result):
    problems = schema_check.errors(result, SCHEMA)
    assert not problems, "\n".join(problems[:20])
    try:
        import jsonschema  # optional second opinion
    except ImportError:
        return
    jsonschema.validate(result, SCHEMA)


def require(path, what):
    if not path.exists():
        pytest.skip(f"skipped: {what} {path} not found")


class MockServer:
    """inflight_mock_sse_server on a free port."""

    def __init__(self, *args):
        require(MOCK, "mock SSE server")
        self.proc = subprocess.Popen([str(MOCK), *args], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    """A GGUF vocabulary from the shared data: tokenizes without the model."""
    packed = DATA / "tokenizers" / "gguf-vocab" / "ggml-vocab-gpt-2.gguf.xz"
    require(packed, "vocabulary")
    path = tmp_path_factory.mktemp("vocab") / "gpt-2.gguf"
    path.write_bytes(lzma.decompress(packed.read_bytes()))
    return path


def bench(*args, timeout=300):
    require(BIN, "binary")
    proc = subprocess.run([str(BIN), "bench", *args], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_serve_on_mock_server_validates(tmp_path, vocab):
    server = MockServer("--chunks", "8", "--tokens-per-chunk", "2", "--interval-us", "2000")
    try:
        out_json = tmp_path / "serve.json"
        table = bench("serve", "--base-url", server.url, "--tokenizer", str(vocab),
                      "--num-prompts", "20", "--random-input-len", "16",
                      "--random-output-len", "16", "--request-rate", "200", "--burstiness", "0.5",
                      "--max-concurrency", "8", "--goodput", "ttft:1000,tpot:1000",
                      "--percentiles", "50,99.9", "--save-detailed", "--no-progress",
                      "--result-json", str(out_json))
    finally:
        server.stop()
    assert "Serving Benchmark Result" in table
    result = json.loads(out_json.read_text())
    validate(result)
    assert result["completed"] == 20 and result["failed"] == 0
    assert result["total_output_tokens"] == 20 * 16  # from the usage chunks
    assert result["model"] == "mock"
    assert result["input_lens"] == [16] * 20
    assert all(len(itl) == 7 for itl in result["itls"])
    assert "p99.9_itl_ms" in result


def test_interrupt_prints_what_was_measured(tmp_path, vocab):
    # Streams of 1000 chunks 20 ms apart: 20 s each, so every request is in flight.
    server = MockServer("--chunks", "1000", "--interval-us", "20000")
    out_json = tmp_path / "interrupted.json"
    try:
        proc = subprocess.Popen(
            [str(BIN), "bench", "serve", "--base-url", server.url, "--tokenizer", str(vocab),
             "--num-prompts", "4", "--random-input-len", "8", "--random-output-len", "8",
             "--no-progress", "--result-json", str(out_json)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stderr_lines = []
        started = threading.Event()

        def read_stderr():
            for line in proc.stderr:
                stderr_lines.append(line)
                if line.startswith("bench serve:"):
                    started.set()

        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        assert started.wait(60), "".join(stderr_lines)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=60)
        reader.join(timeout=5)
    finally:
        server.stop()
    assert proc.returncode == 130, stdout + "".join(stderr_lines)
    assert "Serving Benchmark Result" in stdout
    result = json.loads(out_json.read_text())
    validate(result)
    assert result["interrupted"] is True
    assert result["not_finished"] == 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerUrl(str):
    grpc_url = ""


@pytest.fixture(scope="module")
def inflight_server():
    """The server's HTTP base URL; its KServe gRPC endpoint is at inflight_server.grpc_url."""
    require(BIN, "binary")
    require(MODEL, "default model")
    grpc_port = free_port()
    proc = subprocess.Popen(
        [str(BIN), "serve", "--model", str(MODEL), "--host", "127.0.0.1", "--port", "0",
         "--grpc-port", str(grpc_port),
         "--max-model-len", "512", "--max-num-seqs", "16", "--kv-cache-memory", "128MiB"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = None
    log = []
    for line in proc.stdout:
        log.append(line)
        m = re.search(r"listening on [\d.]+:(\d+)", line)
        if m:
            url = ServerUrl(f"http://127.0.0.1:{m.group(1)}")
            url.grpc_url = f"127.0.0.1:{grpc_port}"
            break
    assert url, "".join(log)
    drain = threading.Thread(target=lambda: [log.append(x) for x in proc.stdout], daemon=True)
    drain.start()
    yield url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.mark.parametrize("endpoint", ["/v1/completions", "/v1/chat/completions"])
def test_serve_on_inflight_serve_validates(tmp_path, inflight_server, endpoint):
    out_json = tmp_path / "serve.json"
    bench("serve", "--base-url", inflight_server, "--endpoint", endpoint,
          "--num-prompts", "2", "--random-input-len", "16", "--random-output-len", "4",
          "--ignore-eos", "--no-progress", "--ready-timeout", "120",
          "--result-json", str(out_json))
    result = json.loads(out_json.read_text())
    validate(result)
    assert result["completed"] == 2, result
    assert result["total_output_tokens"] == 8
    assert result["num_requests_without_usage"] == 0


def test_serve_kserve_grpc_backend_validates(tmp_path, inflight_server):
    out_json = tmp_path / "serve.json"
    bench("serve", "--backend", "kserve-grpc", "--base-url", inflight_server,
          "--grpc-url", inflight_server.grpc_url, "--tokenizer", str(MODEL),
          "--num-prompts", "3", "--random-input-len", "16", "--random-output-len", "4",
          "--ignore-eos", "--no-progress", "--ready-timeout", "120",
          "--result-json", str(out_json))
    result = json.loads(out_json.read_text())
    validate(result)
    assert result["backend"] == "kserve-grpc"
    assert result["grpc_url"] == inflight_server.grpc_url
    assert result["completed"] == 3, result
    assert result["failed"] == 0
    assert result["mean_ttft_ms"] > 0


def test_offline_validates(tmp_path):
    require(MODEL, "default model")
    out_json = tmp_path / "offline.json"
    bench("offline", "--model", str(MODEL), "--input-len", "8", "--output-len", "4",
          "--num-prompts", "3", "--kv-cache-memory", "64MiB", "--result-json", str(out_json))
    result = json.loads(out_json.read_text())
    validate(result)
    assert result["completed"] == 3
    assert result["total_output_tokens"] == 12


def test_offline_json_schema_validates(tmp_path):
    require(MODEL, "default model")
    out_json = tmp_path / "offline_json.json"
    bench("offline", "--model", str(MODEL), "--input-len", "8", "--output-len", "4",
          "--num-prompts", "3", "--kv-cache-memory", "64MiB", "--result-json", str(out_json),
          "--json-schema", "@" + str(ROOT / "bench" / "schemas" / "offline_records.json"))
    result = json.loads(out_json.read_text())
    validate(result)
    assert result["completed"] == 3
    assert result["structured_output"] == "json_schema"
    # One mask per constrained row and step: a decode row per output token.
    assert result["grammar_masks"] == result["total_output_tokens"] > 0
    assert result["mask_ns_per_token"] > 0


def test_latency_validates(tmp_path):
    require(MODEL, "default model")
    out_json = tmp_path / "latency.json"
    bench("latency", "--model", str(MODEL), "--batch-size", "2", "--input-len", "8",
          "--output-len", "4", "--num-iters", "2", "--num-iters-warmup", "0",
          "--kv-cache-memory", "64MiB", "--result-json", str(out_json))
    result = json.loads(out_json.read_text())
    validate(result)
    assert len(result["latencies"]) == 2


def test_offline_on_dummy_weights_validates(tmp_path):
    # Random weights of a real architecture: no model file, no tokenizer.
    out_json = tmp_path / "offline_dummy.json"
    bench("offline", "--dummy-weights", "--arch", "smollm2-135m", "--device", "cpu",
          "--input-len", "8", "--output-len", "4", "--num-prompts", "2", "--kv-cache-memory", "64MiB",
          "--result-json", str(out_json))
    result = json.loads(out_json.read_text())
    validate(result)
    assert result["model"] == "smollm2-135m"
    assert result["total_output_tokens"] == 8


def test_offline_on_dummy_mpt_validates(tmp_path):
    # MPT's config.json (ALiBi, LayerNorm, GELU MLP, every bias, clip_qkv) on random weights.
    config = ROOT / "tests" / "golden" / "fixtures" / "tiny-mpt-bias" / "config.json"
    out_json = tmp_path / "offline_mpt.json"
    bench("offline", "--dummy-weights", "--config", str(config), "--device", "cpu",
          "--input-len", "8", "--output-len", "4", "--num-prompts", "3", "--kv-cache-memory", "8MiB",
          "--result-json", str(out_json))
    result = json.loads(out_json.read_text())
    validate(result)
    assert result["total_output_tokens"] == 12


def test_schema_rejects_a_broken_result():
    bad = {"mode": "serve", "completed": -1}
    assert schema_check.errors(bad, SCHEMA)


def test_roofline_validates(tmp_path):
    out_json = tmp_path / "roofline.json"
    bench("roofline", "--device", "cpu", "--arch", "llama-3.1-8b", "--repeats", "2",
          "--copy-bytes", str(16 << 20), "--gemm-size", "128", "--result-json", str(out_json))
    result = json.loads(out_json.read_text())
    validate(result)
    assert result["copy_gb_per_s"] > 0 and result["matrix_tflop_per_s"] > 0
    # Llama-3.1-8B in f32: every weight but the 128,256 x 4,096 embedding table.
    assert result["decode_read_bytes"] == 4 * (8_030_261_248 - 128_256 * 4_096)
    assert result["weight_bytes"] == 4 * 8_030_261_248
