#!/usr/bin/env python3
"""Per-token cost of streaming over KServe v2 gRPC against OpenAI SSE over HTTP, on one server.

Starts `inflight serve` (HTTP and gRPC), then runs `inflight bench serve` alternately with
--backend openai and --backend kserve-grpc on the same greedy fixed-length workload, and adds
to each result JSON the server's CPU time during the run: the whole process
(server_cpu_seconds, /proc/PID/stat) and its transport threads (server_transport_cpu_seconds:
the HTTP I/O threads' own counter inflight_http_io_cpu_seconds_total for openai; for
kserve-grpc, every thread not named inflight* -- gRPC's executor and event-engine threads and
the kserve-pump -- i.e. the process total minus the engine and HTTP threads). The engine's
work is the same for both, so the differences per output token are the transport's.

  bench/kserve_overhead.py --bin build/bin/inflight --model models/SmolLM2-135M-Instruct.Q4_1.gguf
"""

import argparse
import datetime
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ticks(path):
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def cpu_snapshot(pid):
    """(process CPU s, {tid: (name, CPU s)})."""
    hz = os.sysconf("SC_CLK_TCK")
    threads = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            threads[task.name] = ((task / "comm").read_text().strip(), ticks(task / "stat") / hz)
        except OSError:
            pass
    return ticks(f"/proc/{pid}/stat") / hz, threads


def http_io_cpu(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    m = re.search(r"^inflight_http_io_cpu_seconds_total\S* (\S+)$", text, re.M)
    return float(m.group(1))


def inflight_threads_cpu(before, after):
    """CPU of the threads named inflight* that lived through the run."""
    total = 0.0
    for tid, (name, cpu) in after.items():
        if name.startswith("inflight") and tid in before:
            total += cpu - before[tid][1]
    return total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=str(ROOT / "build" / "bin" / "inflight"))
    p.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--num-prompts", type=int, default=16)
    p.add_argument("--input-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--max-concurrency", type=int, default=16)
    p.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    p.add_argument("--tag", default="cpu-2core")
    a = p.parse_args()

    http_port, grpc_port = free_port(), free_port()
    url = f"http://127.0.0.1:{http_port}"
    server = subprocess.Popen(
        [a.bin, "serve", "--model", a.model, "--device", "cpu", "--port", str(http_port),
         "--grpc-port", str(grpc_port), "--max-model-len", "512", "--kv-cache-memory", "256MiB",
         # Each pair of runs sends the same prompts: no prefix cache, so the second is no cheaper.
         "--disable-prefix-caching"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while True:
            try:
                if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or server.poll() is not None:
                sys.exit("inflight serve did not become ready")
            time.sleep(0.2)
        date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
        rows = []
        for run in range(1, a.runs + 1):
            for backend in ("openai", "kserve-grpc"):
                out = Path(a.out_dir) / f"kserve-overhead-{backend}-{a.tag}-{date}-run{run}.json"
                cmd = [a.bin, "bench", "serve", "--backend", backend, "--base-url", url,
                       "--grpc-url", f"127.0.0.1:{grpc_port}", "--tokenizer", a.model,
                       "--num-prompts", str(a.num_prompts),
                       "--random-input-len", str(a.input_len),
                       "--random-output-len", str(a.output_len), "--ignore-eos",
                       "--max-concurrency", str(a.max_concurrency), "--seed", str(run),
                       "--no-progress", "--result-json", str(out)]
                io_before = http_io_cpu(url)
                total_before, threads_before = cpu_snapshot(server.pid)
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                total_after, threads_after = cpu_snapshot(server.pid)
                io_after = http_io_cpu(url)
                total = total_after - total_before
                if backend == "openai":
                    transport = io_after - io_before
                else:
                    transport = total - inflight_threads_cpu(threads_before, threads_after)
                result = json.loads(out.read_text())
                result["server_cpu_seconds"] = total
                result["server_transport_cpu_seconds"] = max(transport, 0.0)
                out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
                # Every request generates exactly output_len tokens (--ignore-eos); the result's
                # total_output_tokens re-tokenizes the text for kserve-grpc (no usage), a bit less.
                tokens = a.num_prompts * a.output_len
                rows.append((run, backend, tokens, result["mean_itl_ms"], result["mean_tpot_ms"],
                             1e6 * total / tokens, 1e6 * transport / tokens,
                             1e6 * result["client_cpu_seconds"] / tokens))
        print("run backend      tokens  ITL ms  TPOT ms  server us/tok  transport us/tok  "
              "client us/tok")
        for r in rows:
            print(f"{r[0]:3d} {r[1]:12s} {r[2]:6d} {r[3]:7.1f} {r[4]:8.1f} {r[5]:14.0f} "
                  f"{r[6]:17.1f} {r[7]:14.1f}")
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
