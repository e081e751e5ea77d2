"""1,000 concurrent streaming requests on loopback, CPU backend, default model, tiny max_tokens:
all complete with no errors. Reports the HTTP layer's CPU time per streamed token.

The figure comes from the server's own counters: inflight_http_io_cpu_seconds_total (CPU time
of the I/O threads: accept, parse, validate, tokenize, format SSE, write) over
inflight_http_streamed_tokens_total. The same measurement from a shell:

    inflight serve --port 8000 --max-num-seqs 256 &
    python tests/e2e/load_client.py --url http://127.0.0.1:8000 --requests 1000 \\
        --max-tokens 4 --pid $!
"""

import json
import os

import pytest

from conftest import ServerProcess
from load_client import measure

NUM_REQUESTS = int(os.environ.get("INFLIGHT_LOAD_REQUESTS", "1000"))


@pytest.fixture(scope="module")
def load_server():
    s = ServerProcess(["--max-num-seqs", "256", "--max-num-batched-tokens", "2048",
                       "--max-concurrent-requests", "4096"])
    s.wait_ready()
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def test_1000_concurrent_streams(load_server):
    report = measure(load_server.url, NUM_REQUESTS, max_tokens=4, pid=load_server.proc.pid)
    print("\nload report:", json.dumps(report))
    assert report["errors"] == {}
    assert report["ok"] == NUM_REQUESTS
    assert report["client_text_chunks"] >= NUM_REQUESTS
    assert report["server_streamed_tokens"] == 4 * NUM_REQUESTS
    m = load_server.metrics()
    assert m["inflight_num_requests_running"] == 0
    assert m["inflight_http_requests_in_flight"] == 0
    assert m["inflight_kv_cache_used_blocks"] == 0
    # The HTTP layer is a small part of the work (the model dominates on a CPU backend).
    assert report["http_share_of_process_cpu"] < 0.25
