"""A worker rank started by LLM(..., tensor_parallel_size=N) (inflight/_parallel.py):

    python -m inflight._worker '<model source as JSON>'

joins its spawner's job, loads its shard and runs the steps rank 0 sends until rank 0's engine
shuts down."""

import os
import sys

from ._parallel import run_worker, source_from_json


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python -m inflight._worker SOURCE_JSON (started by inflight.LLM)",
              file=sys.stderr)
        return 2
    try:
        run_worker(source_from_json(sys.argv[1]))
    except Exception as e:  # noqa: BLE001 - reported, then the exit code says it
        print(f"error: inflight worker: {e}", file=sys.stderr, flush=True)
        # Every rank knows the job failed (rank 0 raises it). Ending without MPI_Finalize: a
        # spawned worker that finalizes after a failed load leaves its spawner's own
        # MPI_Finalize spinning at exit (Open MPI), while one that just ends does not.
        os._exit(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
