#!/usr/bin/env python3
"""Two models of one model repository sharing a GPU (`serve --model-repository`): each engine
takes the share its inflight.json names, the GPU's memory in use follows (nvidia-smi), an
unload gives its share back and a load takes it again, and a share that does not fit beside
the others is refused while the server serves on.

    python3 dev/cuda/repository_split.py --bin .devrun-serving/bin/inflight \
        --model .devrun-serving/data/model.gguf --work /tmp/repo_split --result-json OUT.json

Prints one line per check and exits non-zero when one fails.
"""

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import requests

SHARES = {"a": 0.30, "b": 0.45}
BUDGET = 0.9
# The CUDA context and cuBLASLt's workspace of each engine come on top of its share.
SLACK_GIB = 1.5


def gpu_used_gib():
    out = subprocess.check_output(
        ["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"],
        text=True).splitlines()[0]
    used, total = (float(v) / 1024 for v in out.split(","))
    return used, total


def wait(cond, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if cond():
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise TimeoutError(what)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--port", type=int, default=8131)
    p.add_argument("--device", default="cuda", help="cpu: a dry run of the flow (no GPU shares)")
    p.add_argument("--result-json")
    a = p.parse_args()

    repo = Path(a.work) / "repo"

    def add_model(name, share):
        d = repo / name
        d.mkdir(parents=True, exist_ok=True)
        link = d / "model.gguf"
        if not link.exists():
            link.symlink_to(Path(a.model).resolve())
        (d / "inflight.json").write_text(json.dumps(
            {"gpu_memory_utilization": share, "device": a.device, "max_model_len": 2048}))

    for name, share in SHARES.items():
        add_model(name, share)
    url = f"http://127.0.0.1:{a.port}"
    idle, total = gpu_used_gib()
    log = open(Path(a.work) / "serve.log", "w")
    server = subprocess.Popen(
        [a.bin, "serve", "--model-repository", str(repo), "--model-control-mode", "explicit",
         "--load-model", "a", "--load-model", "b", "--port", str(a.port), "--grpc-port", "0",
         "--gpu-memory-utilization", str(BUDGET)], stdout=log, stderr=subprocess.STDOUT)
    checks, figures = [], {"gpu_total_gib": round(total, 2), "idle_used_gib": round(idle, 2)}

    def check(name, ok, detail=""):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
        print(f"{'PASS' if ok else 'FAIL'}  {name}  {detail}", flush=True)

    def state(model):
        index = requests.post(url + "/v2/repository/index", timeout=10).json()
        return {m["name"]: m["state"] for m in index}.get(model)

    try:
        wait(lambda: requests.get(url + "/v2/health/ready", timeout=5).status_code == 200, 300,
             "the server's start-up loads")
        both, _ = gpu_used_gib()
        expected = (SHARES["a"] + SHARES["b"]) * total
        figures["both_loaded_used_gib"] = round(both, 2)
        check("two engines take their shares", abs(both - idle - expected) <= 2 * SLACK_GIB,
              f"{both - idle:.1f} GiB in use for {expected:.1f} GiB of shares")
        for model in SHARES:
            r = requests.post(url + "/v1/completions", timeout=60, json={
                "model": model, "prompt": "The capital of France is", "max_tokens": 8,
                "temperature": 0})
            check(f"{model} answers", r.status_code == 200, r.text[:120])
        plans = re.findall(r"memory plan on ([^(]*) \(.*?KV cache ([\d.]+) GiB",
                           (Path(a.work) / "serve.log").read_text())
        figures["kv_cache_gib"] = [float(kv) for _, kv in plans]
        check("one memory plan per model", len(plans) == 2, str(plans))

        requests.post(url + "/v2/repository/models/b/unload", timeout=10).raise_for_status()
        wait(lambda: state("b") == "UNAVAILABLE", 60, "b unloading")
        after, _ = gpu_used_gib()
        figures["b_unloaded_used_gib"] = round(after, 2)
        check("an unload gives its share back",
              abs((both - after) - SHARES["b"] * total) <= SLACK_GIB,
              f"{both - after:.1f} GiB freed for a share of {SHARES['b'] * total:.1f} GiB")

        # A directory added now: its share is planned beside a's and b's (b keeps its share
        # while unloaded), 0.3 + 0.45 + 0.3 > 0.9.
        add_model("c", 0.3)
        r = requests.post(url + "/v2/repository/models/c/load", timeout=120)
        check("a share that does not fit is refused", r.status_code == 400 and
              "budget" in r.text, r.text[:160])
        check("the server serves on", requests.post(url + "/v1/completions", timeout=60, json={
            "model": "a", "prompt": "Hi", "max_tokens": 2}).status_code == 200)

        r = requests.post(url + "/v2/repository/models/b/load", timeout=300)
        again, _ = gpu_used_gib()
        figures["b_reloaded_used_gib"] = round(again, 2)
        check("a load takes the share again", r.status_code == 200 and
              abs(again - both) <= SLACK_GIB, f"{again:.1f} GiB in use, {both:.1f} before")
    except Exception as e:  # noqa: BLE001 - reported as a failed check
        check("run", False, repr(e))
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    if a.result_json:
        Path(a.result_json).write_text(json.dumps(
            {"shares": SHARES, "budget": BUDGET, "figures": figures, "checks": checks}, indent=2))
    sys.exit(0 if checks and all(c["ok"] for c in checks) else 1)


if __name__ == "__main__":
    main()
