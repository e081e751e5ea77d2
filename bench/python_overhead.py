#!/usr/bin/env python3
"""The cost of the Python API over the C++ engine.

1. Offline: the same batch (num_prompts random token-id prompts of input_len tokens, greedy,
   ignore_eos, output_len tokens each, all queued at once, one warm-up request first) through
   `inflight bench offline` and through LLM.generate; runs alternate, repeats of each, and the
   medians of the elapsed times are compared (python_over_cpp = python / cpp). On a shared
   machine wall times vary with other load, so CPU times are recorded too: the whole Python
   process during generate, and the calling thread's share of it (conversion, waits, results:
   the work the Python path adds), and the C++ process's (model load and warm-up included).
2. Async: `streams` concurrent AsyncLLM.generate streams of output_len tokens each; the event
   loop thread's CPU time (time.thread_time) divided by the tokens streamed is the per-token
   cost of an async stream (submit, wake-up, drain, conversion, delivery to the consumer).

    .venv/bin/python bench/python_overhead.py --result-json bench/results/python-overhead.json
    # on a GPU, dummy Llama-3.1-8B shapes, the offline 128/128 setting (tok/s printed):
    python bench/python_overhead.py --dummy llama-3.1-8b --device cuda --num-prompts 4096 \
        --input-len 128 --output-len 128 --max-num-seqs 1024 --max-num-batched-tokens 16384 \
        --max-model-len 4096 --kv-cache-memory 0.9 --repeats 2 --streams 0
Needs the installed `inflight` package and the binary ($INFLIGHT_BIN, default build/bin/inflight).
"""

import argparse
import asyncio
import gc
import json
import os
import random
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def engine_kwargs(a):
    kw = {"device": a.device, "max_num_seqs": a.max_num_seqs, "kv_cache_memory": a.kv_cache_memory,
          "max_num_batched_tokens": a.max_num_batched_tokens, "max_model_len": a.max_model_len}
    if a.dummy:
        kw.update(load_format="dummy")
    return kw


def cli_engine_args(a):
    args = ["--device", a.device, "--max-num-seqs", str(a.max_num_seqs),
            "--max-num-batched-tokens", str(a.max_num_batched_tokens),
            "--max-model-len", str(a.max_model_len), "--kv-cache-memory", a.kv_cache_memory]
    if a.dummy:
        return ["--dummy-weights", "--arch", a.dummy] + args
    return ["--model", a.model] + args


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_cpp(a):
    """The result JSON of `inflight bench offline`, and the CPU time of the whole process (model
    load and warm-up included)."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "offline.json"
        cmd = [a.bin, "bench", "offline", *cli_engine_args(a), "--num-prompts", str(a.num_prompts),
               "--input-len", str(a.input_len), "--output-len", str(a.output_len),
               "--result-json", str(out)]
        cpu = children_cpu()
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.exit(f"{shlex.join(cmd)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
        return json.loads(out.read_text()), children_cpu() - cpu


def random_prompts(a, vocab_size, seed):
    rng = random.Random(seed)
    # Real vocabularies: skip the first 1,000 ids, where the special and byte tokens live.
    low = 0 if a.dummy else min(1000, vocab_size // 2)
    return [[rng.randrange(low, vocab_size) for _ in range(a.input_len)]
            for _ in range(a.num_prompts)]


def run_python(llm, a, seed):
    from inflight import SamplingParams
    params = SamplingParams(temperature=0, max_tokens=a.output_len, ignore_eos=True)
    prompts = random_prompts(a, llm._core.vocab_size, seed)
    llm.generate(prompts[:1], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True),
                 use_tqdm=False)  # warm-up, as `inflight bench offline` does
    caller_cpu, process_cpu = time.thread_time(), time.process_time()
    start = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    elapsed = time.perf_counter() - start
    caller_cpu, process_cpu = time.thread_time() - caller_cpu, time.process_time() - process_cpu
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    assert tokens == a.num_prompts * a.output_len, tokens
    return elapsed, tokens, caller_cpu, process_cpu


def run_async(a, seed):
    from inflight import AsyncLLM, SamplingParams
    engine = AsyncLLM(a.model if not a.dummy else a.dummy, **engine_kwargs(a))
    params = SamplingParams(temperature=0, max_tokens=a.output_len, ignore_eos=True)
    prompts = random_prompts(a, engine._core.vocab_size, seed)[:a.streams]
    while len(prompts) < a.streams:
        prompts += prompts[:a.streams - len(prompts)]

    async def stream(p):
        n = 0
        async for out in engine.generate(p, params):
            n += len(out.outputs[0].token_ids)
        return n

    async def main():
        cpu = time.thread_time()
        wall = time.perf_counter()
        counts = await asyncio.gather(*(stream(p) for p in prompts))
        return sum(counts), time.thread_time() - cpu, time.perf_counter() - wall

    tokens, cpu, wall = asyncio.run(main())
    engine.shutdown()
    return tokens, cpu, wall


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--dummy", help="dummy weights of this architecture preset (llama-3.1-8b)")
    p.add_argument("--device", default="auto")
    p.add_argument("--bin", default=os.environ.get("INFLIGHT_BIN",
                                                   str(ROOT / "build" / "bin" / "inflight")))
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--input-len", type=int, default=8)
    p.add_argument("--output-len", type=int, default=8)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=int, default=0, help="0: the engine's default")
    p.add_argument("--max-model-len", type=int, default=0, help="0: the model's")
    p.add_argument("--kv-cache-memory", default="auto")
    p.add_argument("--repeats", type=int, default=2, help="runs of each path, alternating")
    p.add_argument("--streams", type=int, default=200, help="async streams (0: skip)")
    p.add_argument("--skip-cpp", action="store_true", help="only the Python path (GPU check)")
    p.add_argument("--result-json")
    a = p.parse_args()

    from inflight import LLM
    cpp, py, cpp_cpu, py_caller_cpu, py_cpu = [], [], [], [], []
    cpp_result = None
    for r in range(a.repeats):
        if not a.skip_cpp:
            cpp_result, cpu = run_cpp(a)
            cpp.append(cpp_result["elapsed_time"])
            cpp_cpu.append(cpu)
            print(f"C++    run {r}: {cpp[-1]:.3f} s  "
                  f"{cpp_result['output_throughput']:.1f} output tok/s", flush=True)
        # An engine per run, shut down before the next C++ run: on a GPU the two would not fit
        # at once (each plans the KV cache over the free memory).
        llm = LLM(a.dummy or a.model, **engine_kwargs(a))
        elapsed, tokens, caller_cpu, process_cpu = run_python(llm, a, seed=r)
        device = llm.device
        llm.shutdown()
        del llm
        gc.collect()  # the engine's device memory goes with its last reference
        py.append(elapsed)
        py_caller_cpu.append(caller_cpu)
        py_cpu.append(process_cpu)
        print(f"Python run {r}: {elapsed:.3f} s  {tokens / elapsed:.1f} output tok/s; CPU "
              f"{process_cpu:.2f} s, of which the calling thread {caller_cpu:.3f} s", flush=True)

    result = {"mode": "python_overhead",
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "device": cpp_result["device"] if cpp_result else device,
              "commit": cpp_result["commit"] if cpp_result else "unknown",
              "command": " ".join(shlex.quote(x) for x in sys.argv),
              "model": a.dummy or a.model, "backend": device,
              "num_prompts": a.num_prompts, "input_len": a.input_len,
              "output_len": a.output_len, "max_num_seqs": a.max_num_seqs,
              "repeats": a.repeats,
              "python_elapsed_times": py,
              "python_elapsed_time": statistics.median(py),
              "python_process_cpu_seconds": py_cpu,
              "python_caller_cpu_seconds": py_caller_cpu,
              "python_caller_cpu_fraction": sum(py_caller_cpu) / sum(py_cpu),
              "python_output_throughput": a.num_prompts * a.output_len / statistics.median(py)}
    if cpp:
        result.update(cpp_elapsed_times=cpp, cpp_elapsed_time=statistics.median(cpp),
                      cpp_process_cpu_seconds=cpp_cpu,
                      cpp_output_throughput=a.num_prompts * a.output_len / statistics.median(cpp),
                      python_over_cpp=statistics.median(py) / statistics.median(cpp))
        print(f"Python / C++ total time: {result['python_over_cpp']:.4f}")
    print(f"Python output throughput: {result['python_output_throughput']:.1f} tok/s")
    if a.streams:
        tokens, cpu, wall = run_async(a, seed=99)
        result.update(async_streams=a.streams, async_tokens=tokens, async_loop_cpu_seconds=cpu,
                      async_wall_seconds=wall, async_us_per_token=cpu / tokens * 1e6)
        print(f"async: {a.streams} streams, {tokens} tokens in {wall:.2f} s; event loop CPU "
              f"{cpu:.3f} s = {result['async_us_per_token']:.1f} us per token")
    if a.result_json:
        Path(a.result_json).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
        print(f"wrote {a.result_json}")


if __name__ == "__main__":
    main()
