"""End-to-end fixtures: a real `inflight serve` on a free loopback port with the default model.

The binary is $INFLIGHT_BIN (scripts/test.sh sets it to build/bin/inflight); the model is
$INFLIGHT_TEST_MODEL or models/SmolLM2-135M-Instruct.Q4_1.gguf. Tests skip, saying why, when
either is missing. Limits are small: the CI machine has 2 cores and runs the CPU backend.
"""

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("INFLIGHT_BIN", ROOT / "build" / "bin" / "inflight"))
MODEL = Path(os.environ.get("INFLIGHT_TEST_MODEL",
                            ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
MAX_MODEL_LEN = 512
# Seconds a test waits on the server; raise it for slow builds (sanitizers).
TIMEOUT = float(os.environ.get("INFLIGHT_E2E_TIMEOUT", "120"))
SERVED_NAME = "smollm2"

# Small limits for a 2-core CPU machine.
DEFAULT_ARGS = [
    "--max-model-len", str(MAX_MODEL_LEN),
    "--max-num-seqs", "64",
    "--max-num-batched-tokens", "1024",
    "--kv-cache-memory", "256MiB",
    "--max-body-bytes", str(1 << 20),
    "--served-model-name", SERVED_NAME,
    "--grpc-port", "0",  # off: servers run side by side (tests/e2e/test_kserve_grpc.py picks one)
]


class ServerProcess:
    """One `inflight serve` child process; `url` is its base URL once started."""

    def __init__(self, extra_args=(), env=None, model=None, repository=None):
        """`model` replaces the default model file (a path); `repository` serves a model
        repository directory instead (--model-repository)."""
        model = Path(model) if model is not None else MODEL
        if not BIN.exists():
            pytest.skip(f"skipped: {BIN} not built (set INFLIGHT_BIN)")
        if not model.exists():
            pytest.skip(f"skipped: {model} not found (run scripts/fetch_model.sh)")
        # extra_args override the defaults (each option may be given once).
        defaults = [a for i in range(0, len(DEFAULT_ARGS), 2)
                    if DEFAULT_ARGS[i] not in extra_args for a in DEFAULT_ARGS[i:i + 2]]
        source = (["--model-repository", str(repository)] if repository is not None
                  else ["--model", str(model)])
        cmd = [str(BIN), "serve", *source, "--host", "127.0.0.1", "--port", "0",
               *defaults, *extra_args]
        self.log = []
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env={**os.environ, **(env or {})})
        self.port = None
        deadline = time.time() + 30
        while self.port is None:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("inflight serve exited early:\n" + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on [\d.]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if time.time() > deadline:
                raise RuntimeError("inflight serve did not start:\n" + "".join(self.log))
        # Keep draining the log so the child never blocks on a full pipe.
        self._drain = threading.Thread(target=self._read_log, daemon=True)
        self._drain.start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _read_log(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("inflight serve exited:\n" + "".join(self.log))
            time.sleep(0.1)
        raise RuntimeError("inflight serve never became healthy:\n" + "".join(self.log))

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Sends `sig` and returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._drain.join(timeout=5)
        return self.proc.returncode

    def metrics(self):
        """/metrics as {name{labels}: value}, labels without model_name."""
        text = requests.get(self.url + "/metrics", timeout=10).text
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name, value = line.rsplit(" ", 1)
            name = re.sub(r'model_name="(?:[^"\\]|\\.)*",?', "", name).replace("{}", "")
            out[name] = float(value)
        return out


@pytest.fixture(scope="session")
def server():
    """The shared server: default limits, no API key."""
    s = ServerProcess()
    s.wait_ready()
    yield s
    rc = s.stop()
    assert rc == 0, "".join(s.log[-50:])


@pytest.fixture(scope="session")
def base_url(server):
    return server.url


@pytest.fixture(scope="session")
def client(server):
    from openai import OpenAI
    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def model_name():
    return SERVED_NAME


def post_json(url, body, **kwargs):
    return requests.post(url, data=json.dumps(body), headers={"Content-Type": "application/json"},
                         timeout=kwargs.pop("timeout", 120), **kwargs)


def sse_events(text):
    """The `data:` payloads of an SSE body, in order."""
    events = []
    for block in text.split("\n\n"):
        lines = [l[len("data:"):].lstrip() for l in block.split("\n") if l.startswith("data:")]
        if lines:
            events.append("\n".join(lines))
    return events
