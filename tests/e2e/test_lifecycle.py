"""Start-up and shutdown: 503 until the model is loaded; on SIGTERM/SIGINT stop accepting, let
in-flight requests finish (within --shutdown-timeout), exit 0."""

import signal
import threading
import time

import pytest
import requests

from conftest import ServerProcess


def test_503_until_loaded():
    s = ServerProcess()
    try:
        r = requests.get(s.url + "/health", timeout=5)
        early = requests.post(s.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 1},
                              timeout=5)
        metrics = requests.get(s.url + "/metrics", timeout=5)
        if r.status_code == 200:
            pytest.skip("the model loaded before the first probe")
        assert r.status_code == 503
        assert r.json()["error"]["type"] == "ServiceUnavailableError"
        assert early.status_code in (200, 503)  # it may have loaded in between
        assert metrics.status_code == 200
        s.wait_ready()
        assert requests.get(s.url + "/health", timeout=5).status_code == 200
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_graceful_shutdown_finishes_in_flight(sig):
    s = ServerProcess(["--shutdown-timeout", "30"])
    s.wait_ready()
    result = {}

    def generate():
        r = requests.post(s.url + "/v1/completions", timeout=60, json={
            "prompt": "Once upon a time", "max_tokens": 12, "ignore_eos": True,
            "temperature": 0})
        result["status"] = r.status_code
        result["body"] = r.json()

    t = threading.Thread(target=generate)
    t.start()
    deadline = time.time() + 10
    while s.metrics()["inflight_http_requests_in_flight"] < 1 and time.time() < deadline:
        time.sleep(0.01)
    s.proc.send_signal(sig)
    t.join(timeout=60)
    assert s.proc.wait(timeout=60) == 0, "".join(s.log)
    assert result["status"] == 200
    assert result["body"]["usage"]["completion_tokens"] == 12
    # No longer accepting.
    with pytest.raises(requests.ConnectionError):
        requests.get(s.url + "/health", timeout=2)


def test_shutdown_deadline_aborts_stragglers():
    s = ServerProcess(["--shutdown-timeout", "0.5"])
    s.wait_ready()
    r = requests.post(s.url + "/v1/completions", stream=True, timeout=60, json={
        "prompt": "Tell me a story", "max_tokens": 450, "ignore_eos": True, "stream": True})
    lines = r.iter_lines()
    assert next(lines).startswith(b"data: ")
    start = time.time()
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=30) == 0, "".join(s.log)
    assert time.time() - start < 15
    # The stream was aborted, and ended as any stream ends (test_shutdown_streams.py: raw bytes).
    rest = [line for line in lines if line]
    assert rest[-1] == b"data: [DONE]"
    assert b'"finish_reason":"abort"' in rest[-2]
