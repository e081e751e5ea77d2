#!/usr/bin/env python3
"""Single-threaded encode throughput of `inflight tokenize` vs the `tokenizers` package.

Figures are per CPU second (process CPU time around the encode calls) as well as per wall
second: on a shared machine the CPU figure is the stable one.

Corpus: every human/assistant text of shared/data/prompts/prompts_sharegpt_like.json (about
21 MB), encoded with add_special = false and parse_special = false, one text at a time.
Ours: `inflight tokenize --jsonl --stats` reports the time spent in Tokenizer::encode alone
(no JSON, no process start). Theirs: Tokenizer.encode_batch with RAYON_NUM_THREADS=1 (one
worker thread; Python overhead per text is negligible against the Rust work). Token counts
must agree, else the comparison is void and the script fails.

  .venv/bin/python bench/tokenizer/bench_tokenizer.py [--bin build/bin/inflight] [--repeats 3]

Writes bench/results/tokenizer-<date>.json (device, commit, command, figures).
"""
import argparse
import datetime
import json
import lzma
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its thread pool
from tokenizers import Tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("INFLIGHT_DATA_DIR", REPO.parent / "shared" / "data"))

# (label, shared-data path of the file ours loads, tokenizer.json for the package or None)
CASES = [
    ("llama3.1 tokenizer.json", "tokenizers/hf/llama3_1/tokenizer.json", True),
    ("qwen3 tokenizer.json (Qwen2 vocabulary, NFC)", "tokenizers/hf/qwen3/tokenizer.json", True),
    ("llama-bpe GGUF (Llama 3)", "tokenizers/gguf-vocab/ggml-vocab-llama-bpe.gguf", False),
    ("qwen2 GGUF", "tokenizers/gguf-vocab/ggml-vocab-qwen2.gguf", False),
]


def unpack(rel, tmp):
    p = DATA / rel
    if p.exists():
        return p
    out = tmp / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(lzma.decompress((DATA / (rel + ".xz")).read_bytes()))
    return out


def cpu_name():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def ours(binary, path, corpus_jsonl):
    out = subprocess.run([str(binary), "tokenize", "--tokenizer", str(path), "--jsonl", "--stats"],
                         input=corpus_jsonl, capture_output=True, check=True)
    stats = json.loads(out.stderr.decode().strip().splitlines()[-1])
    return stats["encode_seconds"], stats["tokens"], stats["load_seconds"], stats["encode_cpu_seconds"]


def theirs(path, texts):
    tok = Tokenizer.from_file(str(path))
    start, cpu_start = time.perf_counter(), time.process_time()
    encoded = tok.encode_batch(texts, add_special_tokens=False)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return wall, sum(len(e.ids) for e in encoded), cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(REPO / "build" / "bin" / "inflight"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None, help="result file (default bench/results/tokenizer-<date>.json)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="inflight-tokbench-"))
    items = json.loads(unpack("prompts/prompts_sharegpt_like.json", tmp).read_text())
    texts = [c["value"] for item in items for c in item["conversations"]]
    corpus_jsonl = "".join(json.dumps(t) + "\n" for t in texts).encode()
    mb = sum(len(t.encode()) for t in texts) / 1e6

    load_before = os.getloadavg()
    results = []
    for label, rel, has_json in CASES:
        path = unpack(rel, tmp)
        if has_json:  # a directory, so that tokenizer_config.json is found beside it
            d = tmp / Path(rel).parent.name
            d.mkdir(exist_ok=True)
            (d / "tokenizer.json").write_bytes(path.read_bytes())
            path = d / "tokenizer.json"
        runs = [ours(args.bin, path, corpus_jsonl) for _ in range(args.repeats)]
        ours_s = statistics.median(r[0] for r in runs)
        ours_cpu = statistics.median(r[3] for r in runs)
        row = {"tokenizer": label, "file": rel, "ours_encode_seconds": round(ours_s, 3),
               "ours_mb_per_s": round(mb / ours_s, 2), "ours_tokens": runs[0][1],
               "ours_encode_cpu_seconds": round(ours_cpu, 3),
               "ours_mb_per_cpu_s": round(mb / ours_cpu, 2),
               "ours_load_seconds": round(statistics.median(r[2] for r in runs), 3)}
        if has_json:
            ref = [theirs(path, texts) for _ in range(args.repeats)]
            ref_s = statistics.median(r[0] for r in ref)
            ref_cpu = statistics.median(r[2] for r in ref)
            if ref[0][1] != runs[0][1]:
                sys.exit(f"{label}: token counts differ (ours {runs[0][1]}, tokenizers {ref[0][1]})")
            row.update({"tokenizers_encode_seconds": round(ref_s, 3),
                        "tokenizers_mb_per_s": round(mb / ref_s, 2),
                        "tokenizers_encode_cpu_seconds": round(ref_cpu, 3),
                        "tokenizers_mb_per_cpu_s": round(mb / ref_cpu, 2),
                        "speedup_wall": round(ref_s / ours_s, 2),
                        "speedup_cpu": round(ref_cpu / ours_cpu, 2)})
        print(json.dumps(row))
        results.append(row)

    import tokenizers
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True,
                           text=True).stdout.strip() != ""
    report = {
        "benchmark": "tokenizer encode throughput, single thread",
        "date": datetime.date.today().isoformat(),
        "device": {"cpu": cpu_name(), "logical_cpus": os.cpu_count(), "threads_used": 1,
                   # The machine may be shared: a load average above the CPU count means
                   # both sides were slowed by other work and the absolute figures are low.
                   "load_average_1m_before_after": [round(load_before[0], 2),
                                                    round(os.getloadavg()[0], 2)]},
        "commit": commit + ("-dirty" if dirty else ""),
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "corpus": {"file": "prompts/prompts_sharegpt_like.json", "texts": len(texts),
                   "megabytes": round(mb, 2)},
        "reference": f"tokenizers {tokenizers.__version__} (RAYON_NUM_THREADS=1, encode_batch)",
        "repeats": args.repeats, "statistic": "median",
        "results": results,
    }
    out = Path(args.out) if args.out else REPO / "bench" / "results" / f"tokenizer-{report['date']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
