"""LLM(..., tensor_parallel_size=N) in a plain `python script.py`: the engine starts its other
ranks itself (MPI_Comm_spawn, one process each), generates exactly what one process generates,
and its ranks are gone when the script ends. Under `mpirun -np N python script.py` the same
script runs as N ranks. CPU ranks; SmolLM2's 9 heads split 3 ways."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from package_env import LIMITS, MODEL, ROOT, need_model

sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from fp8_checkpoint import write_fp8_llama  # noqa: E402

PROMPTS = ["The capital of France is", "def fib(n):", "Tensor parallelism splits each layer"]

SCRIPT = f"""
import os, sys
import inflight
tp, pp = int(sys.argv[1]), int(sys.argv[2])
llm = inflight.LLM({str(MODEL)!r}, device='cpu', tensor_parallel_size=tp,
                   pipeline_parallel_size=pp, **{LIMITS!r})
params = [inflight.SamplingParams(temperature=0, max_tokens=16, ignore_eos=True),
          inflight.SamplingParams(temperature=0.8, seed=7, max_tokens=16, ignore_eos=True)]
for p in params:
    for out in llm.generate({PROMPTS!r}, p, use_tqdm=False):
        print('TOKENS', out.outputs[0].token_ids, flush=True)
if len(sys.argv) > 3:  # one parallel job per process
    llm.shutdown()
    try:
        inflight.LLM({str(MODEL)!r}, device='cpu', tensor_parallel_size=tp,
                     pipeline_parallel_size=pp, **{LIMITS!r})
    except ValueError as e:
        print('SECOND_JOB', e, flush=True)
print('RANK0 done', flush=True)
"""


def need_mpi():
    if shutil.which("mpirun") is None or shutil.which("orted") is None:
        pytest.skip("skipped: Open MPI (mpirun, orted) not installed (apt install openmpi-bin)")


def mpi_env():
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    return env


def run(cmd, timeout=240):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=mpi_env())
    tokens = [line for line in proc.stdout.splitlines() if line.startswith("TOKENS")]
    return proc, tokens


@pytest.fixture(scope="module")
def one_rank():
    need_model()
    proc, tokens = run([sys.executable, "-c", SCRIPT, "1", "1"])
    assert proc.returncode == 0, proc.stderr
    assert len(tokens) == 2 * len(PROMPTS)
    return tokens


def workers_left():
    out = subprocess.run(["pgrep", "-f", "inflight._worker"], capture_output=True, text=True)
    return out.stdout.split()


@pytest.mark.parametrize("tp,pp", [(3, 1), (1, 2)])
def test_spawned_ranks_generate_what_one_rank_does(one_rank, tp, pp):
    need_mpi()
    proc, tokens = run([sys.executable, "-c", SCRIPT, str(tp), str(pp), "again"])
    assert proc.returncode == 0, proc.stderr
    assert tokens == one_rank  # greedy and seeded sampling, token for token
    assert f"rank {tp * pp - 1} of {tp * pp}" in proc.stderr  # the last rank loaded its shard
    assert "SECOND_JOB" in proc.stdout and "one per process" in proc.stdout, proc.stdout
    assert not workers_left()


def test_under_mpirun_every_rank_runs_the_script(one_rank):
    need_mpi()
    proc, tokens = run(["mpirun", "-np", "3", "--oversubscribe", "--bind-to", "none",
                        sys.executable, "-c", SCRIPT, "3", "1"])
    assert proc.returncode == 0, proc.stderr
    assert tokens == one_rank
    assert proc.stdout.count("RANK0 done") == 1  # the other ranks left inside LLM(...)


def test_a_size_the_model_cannot_take_is_a_value_error_and_leaves_no_rank():
    need_mpi()
    need_model()
    script = f"""
import inflight
try:
    inflight.LLM({str(MODEL)!r}, device='cpu', tensor_parallel_size=2, **{LIMITS!r})
except ValueError as e:
    print('VALUE_ERROR', e, flush=True)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=mpi_env())
    assert "VALUE_ERROR" in proc.stdout and "num_attention_heads" in proc.stdout, proc.stderr
    assert not workers_left()


@pytest.mark.parametrize("failing", [0, 1])
def test_a_rank_that_fails_to_load_is_an_error_naming_it_and_leaves_no_rank(tmp_path, failing):
    """Each rank loads only its slice of each weight: a NaN among the scales of one rank's rows
    fails that rank alone. Every rank learns it before any collective: LLM(...) raises on rank 0
    naming the rank, the tensor slice and the value, and no worker is left."""
    need_mpi()
    need_model()
    model = tmp_path / "fp8-llama"
    write_fp8_llama(model, nan_at=10 + 64 * failing)  # gate_proj rows 0..63: rank 0's, 64..: 1's
    script = f"""
import inflight
try:
    inflight.LLM({str(model)!r}, tokenizer={str(MODEL)!r}, device='cpu', tensor_parallel_size=2,
                 **{LIMITS!r})
except ValueError as e:
    print('VALUE_ERROR', e, flush=True)
print('RANK0 done', flush=True)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=mpi_env())
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "RANK0 done" in proc.stdout, log[-3000:]
    error = next(line for line in proc.stdout.splitlines() if line.startswith("VALUE_ERROR"))
    if failing == 1:
        assert "rank 1 of 2 failed to load" in error, error
    assert f"gate_proj.weight_scale[rows {64 * failing}:" in error, error
    assert "holds nan" in error, error
    assert not workers_left()


def test_a_worker_that_dies_ends_the_job_naming_it():
    """A spawned worker killed mid-generation: rank 0 would wait for it in the step's collective
    forever (MPI does not tell a spawner its workers died); it notices the process has ended and
    stops the job within a second, naming the rank."""
    need_mpi()
    need_model()
    script = f"""
import inflight
llm = inflight.LLM({str(MODEL)!r}, device='cpu', tensor_parallel_size=3, **{LIMITS!r})
print('LOADED', flush=True)
while True:
    llm.generate(['Hi'] * 4, inflight.SamplingParams(max_tokens=200, ignore_eos=True),
                 use_tqdm=False)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=mpi_env())
    try:
        assert proc.stdout.readline().strip() == "LOADED", proc.stderr.read()[-3000:]
        os.kill(int(workers_left()[-1]), 9)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0, err[-3000:]
    assert re.search(r"the process of rank [12] has ended; stopping every rank", err), err[-3000:]
    assert not workers_left()
