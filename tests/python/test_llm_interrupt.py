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
