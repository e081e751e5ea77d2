"""Ctrl-C during LLM.generate cancels every request still running and raises
KeyboardInterrupt; the interpreter then exits without hanging on the engine thread."""

import signal
import subprocess
import sys
import time

from package_env import MODEL, need_model

SCRIPT = f"""
import sys, time
import inflight
llm = inflight.LLM({str(MODEL)!r}, max_model_len=512, kv_cache_memory='128MiB')
params = inflight.SamplingParams(temperature=0, max_tokens=480, ignore_eos=True)
print('ready', flush=True)
try:
    llm.generate(['Tell me a story'] * 8, params, use_tqdm=False)
    print('finished', flush=True)
except KeyboardInterrupt:
    print('interrupted', flush=True)
deadline = time.time() + 30
while llm.stats()['num_running'] and time.time() < deadline:
    time.sleep(0.05)
s = llm.stats()
print('aborted', s['num_requests_aborted'], 'free', s['num_free_kv_blocks'] == s['num_kv_blocks'],
      flush=True)
"""


def test_ctrl_c_cancels_generate():
    need_model()
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:  # the engine's log may come first
        if line.strip() == "ready":
            break
    time.sleep(1.0)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = [x for x in out.splitlines() if not x.startswith("[")]
    assert lines == ["interrupted", "aborted 8 free True"], (out, err)
    assert time.monotonic() - start < 30


EXIT_SCRIPT = f"""
import asyncio
import inflight
engine = inflight.AsyncLLM({str(MODEL)!r}, max_model_len=512, kv_cache_memory='128MiB')
params = inflight.SamplingParams(temperature=0, max_tokens=480, ignore_eos=True)

async def main():
    gen = engine.generate('Tell me a story', params, 'left-open')
    await gen.__anext__()   # one token, then the loop ends with the stream still running

asyncio.run(main())
llm = inflight.LLM({str(MODEL)!r}, max_model_len=256, kv_cache_memory='64MiB')
llm.shutdown()
llm.shutdown()  # idempotent
try:
    llm.generate('Hi', use_tqdm=False)
except RuntimeError as e:
    print('after shutdown:', 'unavailable' in str(e) or 'shut' in str(e))
print('exiting', flush=True)
"""


def test_exit_with_running_streams_does_not_hang():
    """Interpreter exit with a request still running: the finalizers abort and join the engine
    threads; a shut-down engine refuses requests with RuntimeError."""
    need_model()
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["after shutdown: True", "exiting"], out.stderr
    assert time.monotonic() - start < 45
