"""Tensor and pipeline parallelism through the CLI: `inflight serve --tensor-parallel-size 3`
(or `--pipeline-parallel-size 3`, with a micro-batch per stage in flight) on the CPU backend
starts its ranks under mpirun, serves what one rank serves, drains and stops every rank on
SIGTERM (with steps in flight), and ends the whole job, naming the rank, when a rank dies,
hangs or fails to load its slice of the weights.

SmolLM2-135M has 9 heads, 3 KV heads and 30 layers: 3 ranks split it either way. Skips without
mpirun."""

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from conftest import BIN, MODEL, ServerProcess
from fp8_checkpoint import write_fp8_llama

RANKS = 3
# Ranks share the machine's cores: one pool thread each. mpirun refuses root without these.
ENV = {"INFLIGHT_NUM_THREADS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1",
       "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
ARGS = ["--device", "cpu", "--max-num-seqs", "8", "--kv-cache-memory", "64MiB"]

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None,
                                reason="skipped: mpirun not found (apt install openmpi-bin)")


def complete(url, prompt, max_tokens=16):
    r = requests.post(url + "/v1/completions", timeout=300, json={
        "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def stream_finish_reason(url, prompt, max_tokens, started):
    """Streams a completion; sets `started` at its first token and returns its finish reason."""
    with requests.post(url + "/v1/completions", stream=True, timeout=300, json={
            "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True}) as r:
        assert r.status_code == 200, r.text
        reason = None
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            started.set()
            reason = json.loads(line[6:])["choices"][0]["finish_reason"] or reason
        return reason


def ranks_of(server):
    """{rank: pid} of the job's processes (under the launcher and its mpirun)."""
    parent, rank = {}, {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            status = (p / "status").read_text()
            environ = (p / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        pid = int(p.name)
        parent[pid] = int(next(l for l in status.splitlines() if l.startswith("PPid:")).split()[1])
        for e in environ:
            if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                rank[pid] = int(e.split(b"=")[1])

    def under_server(pid):
        while pid > 1:
            if pid == server.proc.pid:
                return True
            pid = parent.get(pid, 0)
        return False

    return {r: pid for pid, r in rank.items() if under_server(pid)}


PROMPTS = ["The capital of France is", "def fibonacci(n):"]
# Three ranks as tensor-parallel ranks, or as pipeline stages (three micro-batches in flight).
LAYOUTS = {"tp3": ["--tensor-parallel-size", str(RANKS)],
           "pp3": ["--pipeline-parallel-size", str(RANKS)]}


@pytest.fixture(scope="module")
def one_rank_texts():
    s = ServerProcess(ARGS, env=ENV)
    try:
        s.wait_ready()
        return [complete(s.url, p) for p in PROMPTS]
    finally:
        assert s.stop() == 0


def test_three_ranks_serve_what_one_rank_serves_and_drain_on_sigterm(one_rank_texts):
    s = ServerProcess([*ARGS, "--tensor-parallel-size", str(RANKS)], env=ENV)
    try:
        s.wait_ready(timeout=300)
        assert sorted(ranks_of(s)) == list(range(RANKS)), "".join(s.log)
        assert [complete(s.url, p) for p in PROMPTS] == one_rank_texts
    finally:
        rc = s.stop(signal.SIGTERM, timeout=120)
    assert rc == 0, "".join(s.log[-40:])


def test_three_stages_serve_concurrent_requests_as_one_rank_and_drain_them_on_sigterm(
        one_rank_texts):
    s = ServerProcess([*ARGS, *LAYOUTS["pp3"]], env=ENV)
    try:
        s.wait_ready(timeout=300)
        assert "max_num_micro_batches 3" in "".join(s.log), "".join(s.log[-40:])
        # Six requests at once: each micro-batch takes two, the three stages one micro-batch each.
        with ThreadPoolExecutor(6) as pool:
            texts = list(pool.map(lambda p: complete(s.url, p), PROMPTS * 3))
        assert texts == one_rank_texts * 3
        # SIGTERM once every stream has its first token: each runs to its length before the job
        # exits.
        started = [threading.Event() for _ in range(6)]
        with ThreadPoolExecutor(6) as pool:
            running = [pool.submit(stream_finish_reason, s.url, p, 24, e)
                       for p, e in zip(PROMPTS * 3, started)]
            for e in started:
                assert e.wait(timeout=300)
            s.proc.send_signal(signal.SIGTERM)
            assert [f.result() for f in running] == ["length"] * 6
        rc = s.proc.wait(timeout=120)
    finally:
        s.stop()
    assert rc == 0, "".join(s.log[-40:])


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_killed_rank_ends_the_job_naming_it(layout):
    s = ServerProcess([*ARGS, *LAYOUTS[layout]], env=ENV)
    try:
        s.wait_ready(timeout=300)
        os.kill(ranks_of(s)[1], signal.SIGKILL)
        start = time.time()
        rc = s.proc.wait(timeout=60)
        assert time.time() - start < 30
    finally:
        s.stop()
    assert rc != 0
    log = "".join(s.log)
    assert "rank 1" in log, log[-3000:]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_hung_rank_ends_the_job_after_the_step_timeout(layout):
    s = ServerProcess([*ARGS, *LAYOUTS[layout]], env={**ENV, "INFLIGHT_STEP_TIMEOUT_S": "3"})
    try:
        s.wait_ready(timeout=300)
        hung = ranks_of(s)[2]
        os.kill(hung, signal.SIGSTOP)  # alive to MPI, but it never joins the step's collectives
        try:
            requests.post(s.url + "/v1/completions", timeout=60,
                          json={"prompt": "Hello", "max_tokens": 4})
        except requests.RequestException:
            pass  # the job ends while the request waits
        rc = s.proc.wait(timeout=60)
    finally:
        s.stop()
    assert rc != 0
    log = "".join(s.log)
    # The ranks still running call the roll: the stopped one does not answer, and is named.
    assert "has not finished after 3 s" in log, log[-3000:]
    assert "rank 2 does not answer (hung or gone)" in log, log[-3000:]


def test_a_size_that_does_not_split_the_model_fails_at_start_naming_it():
    s = ServerProcess([*ARGS, "--tensor-parallel-size", "2"], env=ENV)
    try:
        rc = s.proc.wait(timeout=120)
    finally:
        s.stop()
    assert rc != 0
    log = "".join(s.log)
    assert "does not divide the model's attention heads (num_attention_heads: 9)" in log, log[-3000:]


@pytest.mark.parametrize("failing", [0, 1])
def test_a_rank_that_fails_to_load_ends_the_job_naming_it_and_the_cause(tmp_path, failing):
    """Each rank loads only its slice of each weight: a NaN among the scales of one rank's rows of
    a column-parallel layer fails that rank alone, while the other loads its half and waits for
    it; the job ends within seconds, naming the rank, the tensor and the value."""
    if not BIN.exists() or not MODEL.exists():
        pytest.skip(f"skipped: {BIN} or {MODEL} missing")
    model = tmp_path / "fp8-llama"
    write_fp8_llama(model, nan_at=10 + 64 * failing)  # gate_proj rows 0..63: rank 0's, 64..: 1's
    cmd = [str(BIN), "serve", "--model", str(model), "--tokenizer", str(MODEL), *ARGS,
           "--tensor-parallel-size", "2", "--host", "127.0.0.1", "--port", "0"]
    start = time.time()
    r = subprocess.run(cmd, env={**os.environ, **ENV}, capture_output=True, text=True,
                       timeout=120)
    log = r.stdout + r.stderr
    assert r.returncode != 0, log[-3000:]
    assert time.time() - start < 60, log[-3000:]
    assert f"rank {failing} of 2 failed to load" in log, log[-3000:]  # said by the other rank
    assert f"rank {1 - failing} of 2 failed" not in log, log[-3000:]
    assert f"model.layers.0.mlp.gate_proj.weight_scale[rows {64 * failing}:" in log, log[-3000:]
    assert "holds nan" in log and "finite" in log, log[-3000:]


def test_bench_collectives_on_cpu_ranks_checks_and_times_the_all_reduce(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import schema_check

    out = tmp_path / "collectives.json"
    r = subprocess.run([str(BIN), "bench", "collectives", "--ranks", "2", "--device", "cpu",
                        "--sizes", "8KiB,64KiB", "--iters", "5", "--result-json", str(out)],
                       env={**os.environ, **ENV}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(out.read_text())
    schema = json.loads((Path(__file__).resolve().parents[2] / "bench" /
                         "results.schema.json").read_text())
    assert schema_check.errors(result, schema) == []
    assert result["ranks"] == 2 and [row["bytes"] for row in result["all_reduce"]] == [8192, 65536]
    assert all(row["max_relative_error"] == 0.0 for row in result["all_reduce"])
    assert "all-reduce on 2 ranks" in r.stdout
