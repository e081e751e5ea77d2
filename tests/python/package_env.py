"""What the Python package tests share: the installed `inflight` package on the default model,
small limits for a 2-core CPU machine (the same as tests/e2e's server), and the `inflight`
binary ($INFLIGHT_BIN, default build/bin/inflight) as the oracle."""

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("INFLIGHT_BIN", ROOT / "build" / "bin" / "inflight"))
MODEL = Path(os.environ.get("INFLIGHT_TEST_MODEL",
                            ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))

# Engine limits shared by the package and the binary, so both schedule alike.
LIMITS = {"max_model_len": 512, "max_num_seqs": 64, "max_num_batched_tokens": 1024,
          "kv_cache_memory": "256MiB"}
CLI_LIMITS = ["--max-model-len", "512", "--max-num-seqs", "64", "--max-num-batched-tokens",
              "1024", "--kv-cache-memory", "256MiB"]


def need_model():
    if not MODEL.exists():
        pytest.skip(f"skipped: {MODEL} not found (run scripts/fetch_model.sh)")


def need_bin():
    if not BIN.exists():
        pytest.skip(f"skipped: {BIN} not built (set INFLIGHT_BIN)")


class Server:
    """`inflight serve` on a free loopback port with LIMITS and the hermes tool-call parser."""

    def __init__(self, extra_args=()):
        need_bin()
        need_model()
        cmd = [str(BIN), "serve", "--model", str(MODEL), "--host", "127.0.0.1", "--port", "0",
               "--tool-call-parser", "hermes", *CLI_LIMITS, *extra_args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.log = []
        deadline = time.time() + 60
        port = None
        while port is None:
            line = self.proc.stdout.readline()
            if not line or time.time() > deadline:
                self.proc.kill()
                raise RuntimeError("inflight serve did not start:\n" + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on [\d.]+:(\d+)", line)
            port = int(m.group(1)) if m else None
        threading.Thread(target=lambda: [self.log.append(x) for x in self.proc.stdout],
                         daemon=True).start()
        self.url = f"http://127.0.0.1:{port}"

    def post(self, path, body, timeout=120):
        import requests
        deadline = time.time() + timeout
        while True:
            r = requests.post(self.url + path, json=body, timeout=timeout)
            if r.status_code != 503 or time.time() > deadline:  # 503 while the model loads
                return r
            time.sleep(0.2)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
