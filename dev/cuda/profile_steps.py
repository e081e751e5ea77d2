#!/usr/bin/env python3
"""Where a step's device time goes: runs a command under Nsight Systems (kernels inside CUDA
graphs traced one by one), cuts the GPU trace into bursts at idle gaps, and prints for the last
burst (the last measured iteration) every kernel's count and time, the burst's span and how
much of it the device sat idle, and the CPU time of the CUDA API calls.

  python3 dev/cuda/profile_steps.py --out DIR --name NAME -- COMMAND ...

Writes DIR/NAME.nsys-rep, DIR/NAME.txt (the table) and DIR/NAME.json.
"""
import argparse
import csv
import io
import json
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path


def nsys_binary():
    for c in [shutil.which("nsys"), *sorted(Path("/usr/local/cuda/bin").glob("nsys")),
              *sorted(Path("/opt/nvidia").glob("nsight-systems*/*/bin/nsys")),
              *sorted(Path("/opt/nvidia").glob("nsight-systems*/bin/nsys")),
              *sorted(Path("/usr/local/cuda").glob("nsight-systems*/bin/nsys"))]:
        if c and Path(c).exists():
            return str(c)
    return None


def report(nsys, rep, name):
    out = subprocess.run([nsys, "stats", "--force-export=true", "--report", name, "--format",
                          "csv", "--output", "-", str(rep)],
                         capture_output=True, text=True, check=False)
    text = out.stdout
    start = text.find('"')  # the CSV starts at its quoted header; notices come before it
    rows = list(csv.DictReader(io.StringIO(text[start:] if start >= 0 else text)))
    if not rows:
        print(f"{name}: no rows ({out.stderr.strip()[-400:]})")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--gap-us", type=float, default=2000.0,
                   help="device idle longer than this starts a new burst")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    nsys = nsys_binary()
    if nsys is None:
        sys.exit("nsys not found")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rep = out / f"{a.name}.nsys-rep"
    subprocess.run([nsys, "profile", "--force-overwrite=true", "--trace=cuda",
                    "--cuda-graph-trace=node", "--sample=none", "--cpuctxsw=none",
                    "--output", str(rep), *cmd], check=True, stdout=subprocess.DEVNULL)
    trace = report(nsys, rep, "cuda_gpu_trace")
    kernels = []
    for r in trace:
        name = r.get("Name", "")
        if not name or name.startswith("[CUDA mem"):
            continue
        start, dur = float(r["Start (ns)"]), float(r["Duration (ns)"])
        kernels.append((start, dur, name))
    kernels.sort()
    bursts, current, end = [], [], None
    for k in kernels:
        if end is not None and k[0] - end > a.gap_us * 1e3:
            bursts.append(current)
            current = []
        current.append(k)
        end = max(end or 0, k[0] + k[1])
    if current:
        bursts.append(current)
    last = bursts[-1] if bursts else []
    span = (max(s + d for s, d, _ in last) - last[0][0]) if last else 0
    busy = sum(d for _, d, _ in last)
    by_name = defaultdict(lambda: [0, 0.0])
    for _, d, n in last:
        by_name[n][0] += 1
        by_name[n][1] += d
    lines = [f"burst {i}: {len(b)} kernels, span {(max(s + d for s, d, _ in b) - b[0][0]) / 1e3:.1f} us, "
             f"kernels {sum(d for _, d, _ in b) / 1e3:.1f} us"
             for i, b in list(enumerate(bursts))[-6:]]
    lines += [f"{a.name}: {len(bursts)} bursts; the last: {len(last)} kernels, span "
             f"{span / 1e3:.1f} us, kernels {busy / 1e3:.1f} us, idle {100 * (1 - busy / span) if span else 0:.1f}%",
             f"{'us':>10} {'count':>6} {'us/each':>9}  kernel"]
    for n, (c, d) in sorted(by_name.items(), key=lambda x: -x[1][1])[:a.top]:
        lines.append(f"{d / 1e3:10.1f} {c:6d} {d / 1e3 / c:9.2f}  {n[:150]}")
    api = report(nsys, rep, "cuda_api_sum")
    lines.append("CUDA API (whole run): total ms, calls, name")
    for r in api[:12]:
        lines.append(f"  {float(r.get('Total Time (ns)', 0)) / 1e6:10.1f} {r.get('Num Calls', '')!s:>8}  {r.get('Name', '')}")
    text = "\n".join(lines)
    print(text)
    (out / f"{a.name}.txt").write_text(text + "\n")
    (out / f"{a.name}.json").write_text(json.dumps(
        {"command": cmd, "bursts": len(bursts), "last_burst_span_us": span / 1e3,
         "last_burst_kernel_us": busy / 1e3,
         "kernels": {n: {"count": c, "us": d / 1e3} for n, (c, d) in by_name.items()}},
        indent=1) + "\n")


if __name__ == "__main__":
    main()
