"""Tensor and pipeline parallelism from Python: one process per rank, as `inflight serve` runs.

`LLM(..., tensor_parallel_size=T, pipeline_parallel_size=P)` in a plain `python script.py`
starts the T x P - 1 other ranks itself (MPI_Comm_spawn, as `python -m inflight._worker`) and
serves as rank 0; they stop when its engine shuts down. Under `mpirun -np T*P python
script.py` the ranks are already there: rank 0 goes on, every other rank runs its shard's steps
inside the LLM(...) call and then ends the process (SystemExit, code 0), so code after it runs
on rank 0 only. Open MPI (openmpi-bin) must be installed either way; docs/python.md.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from . import _inflight

# ModelSource's fields a worker needs to load its shard (include/inflight/config.h).
_SOURCE_FIELDS = ("path", "dummy_arch", "dummy_config", "dummy_seed", "tokenizer", "device",
                  "quantization", "kv_cache_dtype", "tensor_parallel_size",
                  "pipeline_parallel_size")


def source_to_json(source) -> str:
    return json.dumps({name: getattr(source, name) for name in _SOURCE_FIELDS})


def source_from_json(text: str):
    source = _inflight.ModelSource()
    for name, value in json.loads(text).items():
        if name not in _SOURCE_FIELDS:
            raise ValueError(f"unknown model source field {name!r}")
        setattr(source, name, value)
    return source


def launched_by_mpirun() -> bool:
    return any(os.environ.get(v) for v in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"))


def run_worker(source) -> None:
    """This process as a rank other than 0: its shard's steps until rank 0's engine stops.
    Rank 0 stops it; a signal here would cut a step short (the terminal's Ctrl-C reaches every
    process of the group), so SIGINT, SIGTERM and SIGUSR1 are ignored, as `inflight serve`'s
    ranks do."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_IGN)
    _inflight.run_worker(source)


def start_ranks(source) -> None:
    """Makes this process rank 0 of the job `source` asks for (tensor x pipeline parallel size
    > 1). Under mpirun a process of another rank never returns from here."""
    if launched_by_mpirun():
        if _inflight.join_parallel_job() != 0:
            try:
                run_worker(source)
            except Exception as e:  # noqa: BLE001 - the rank ends here either way
                print(f"error: {e}", file=sys.stderr, flush=True)
                raise SystemExit(1) from None
            raise SystemExit(0)  # a normal exit: MPI is finalised, as mpirun expects
        return
    _inflight.start_workers(source, [sys.executable, "-m", "inflight._worker",
                                     source_to_json(source)])
