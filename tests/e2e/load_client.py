"""Load generator: N concurrent streaming /v1/completions requests over raw asyncio sockets.

    python tests/e2e/load_client.py --url http://127.0.0.1:8000 --requests 1000 --max-tokens 4

Every request opens its own connection at once (no client-side queueing), reads the chunked SSE
body to the end and checks it: status 200, well-formed `data:` events, the final finish_reason,
`data: [DONE]`. Prints one JSON object: counts, errors, wall time, latency percentiles, and the
server's own figures read from /metrics before and after (the HTTP layer's CPU seconds per
streamed token and per request, and the whole process's when --pid is given).
"""

import argparse
import asyncio
import json
import os
import re
import time
import urllib.request


def read_metrics(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[re.sub(r"\{.*\}", "", name) if "_bucket" not in name else name] = float(value)
    return out


def process_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_request(host, port, body, timeout):
    """Returns (ok, error, latency_s, ttft_s, tokens)."""
    start = time.perf_counter()
    payload = json.dumps(body).encode()
    request = (b"POST /v1/completions HTTP/1.1\r\nHost: " + host.encode() +
               b"\r\nContent-Type: application/json\r\nContent-Length: " +
               str(len(payload)).encode() + b"\r\n\r\n" + payload)
    writer = None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        writer.write(request)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        status = int(head.split(b" ", 2)[1])
        if status != 200:
            return False, f"status {status}", 0, 0, 0
        if b"transfer-encoding: chunked" not in head.lower():
            return False, "not chunked", 0, 0, 0
        body_bytes, ttft = b"", None
        while True:
            size = int((await asyncio.wait_for(reader.readuntil(b"\r\n"), timeout)).strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            body_bytes += (await asyncio.wait_for(reader.readexactly(size + 2), timeout))[:-2]
            if ttft is None:
                ttft = time.perf_counter() - start
        text = body_bytes.decode()
        if not text.endswith("data: [DONE]\n\n"):
            return False, "no [DONE]", 0, 0, 0
        events = [e[len("data: "):] for e in text.split("\n\n")[:-2]]
        chunks = [json.loads(e) for e in events]
        if not chunks or chunks[-1]["choices"][0]["finish_reason"] not in ("length", "stop"):
            return False, "no finish_reason", 0, 0, 0
        texts = sum(1 for c in chunks if c["choices"] and c["choices"][0]["text"])
        return True, "", time.perf_counter() - start, ttft or 0, texts
    except Exception as e:  # every failure is counted and reported, none is fatal
        return False, f"{type(e).__name__}: {e}", 0, 0, 0
    finally:
        if writer is not None:
            writer.close()


def percentile(values, p):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


async def run_load(url, n, max_tokens, timeout, prompt):
    host, port = url.removeprefix("http://").split(":")
    body = {"prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "temperature": 0.8, "ignore_eos": True}
    tasks = [one_request(host, int(port), {**body, "seed": i}, timeout) for i in range(n)]
    return await asyncio.gather(*tasks)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--prompt", default="Hello")
    ap.add_argument("--pid", type=int, help="server pid, to report its whole CPU time")
    args = ap.parse_args(argv)
    return measure(args.url, args.requests, args.max_tokens, args.timeout, args.pid, args.prompt)


def measure(url, n, max_tokens, timeout=600, pid=None, prompt="Hello"):
    before = read_metrics(url)
    cpu_before = process_cpu_seconds(pid) if pid else 0
    start = time.perf_counter()
    results = asyncio.run(run_load(url, n, max_tokens, timeout, prompt))
    wall = time.perf_counter() - start
    after = read_metrics(url)
    ok = [r for r in results if r[0]]
    errors = {}
    for r in results:
        if not r[0]:
            errors[r[1]] = errors.get(r[1], 0) + 1
    http_cpu = after["inflight_http_io_cpu_seconds_total"] - before[
        "inflight_http_io_cpu_seconds_total"]
    tokens = after["inflight_http_streamed_tokens_total"] - before[
        "inflight_http_streamed_tokens_total"]
    report = {
        "requests": n, "ok": len(ok), "errors": errors, "max_tokens": max_tokens,
        "wall_s": round(wall, 3),
        "client_text_chunks": sum(r[4] for r in ok),
        "server_streamed_tokens": tokens,
        "latency_p50_s": round(percentile([r[2] for r in ok], 50), 3),
        "latency_p99_s": round(percentile([r[2] for r in ok], 99), 3),
        "ttft_p50_s": round(percentile([r[3] for r in ok], 50), 3),
        "http_cpu_s": round(http_cpu, 4),
        "http_cpu_us_per_token": round(1e6 * http_cpu / tokens, 1) if tokens else None,
        "http_cpu_us_per_request": round(1e6 * http_cpu / n, 1),
    }
    if pid:
        total = process_cpu_seconds(pid) - cpu_before
        report["process_cpu_s"] = round(total, 3)
        report["http_share_of_process_cpu"] = round(http_cpu / total, 4) if total else None
    return report


if __name__ == "__main__":
    print(json.dumps(main()))
