"""Streams still running when the shutdown deadline passes, or when a second SIGINT/SIGTERM
comes during the drain, end cleanly: OpenAI streams with a finish_reason "abort" chunk, then
`data: [DONE]` and the terminating chunk; TGI streams with their final event."""

import json
import signal
import time

import pytest

from conftest import ServerProcess, sse_events
from raw_http import connect, read_all, parse_responses, request

LONG = {"max_tokens": 450, "ignore_eos": True, "stream": True, "temperature": 0}


def open_stream(s, path, body):
    sock = connect(s.port, timeout=60)
    sock.sendall(request("POST", path, s.port, [("Content-Type", "application/json")],
                         json.dumps(body).encode()))
    first, _ = read_all(sock, timeout=60, until=lambda d: b"data:" in d)
    assert b"data:" in first, first
    return sock, first


def finish(s, sock, first, timeout=30):
    """The rest of the stream, parsed; asserts the server exited 0 and ended the chunked body."""
    rest, closed = read_all(sock, timeout=timeout)
    sock.close()
    data = first + rest
    assert s.proc.wait(timeout=timeout) == 0, "".join(s.log[-30:])
    assert closed
    assert data.endswith(b"\r\n0\r\n\r\n"), data[-200:]  # the terminating chunk
    [(status, headers, body)] = parse_responses(data)
    assert status == 200
    return sse_events(body.decode())


@pytest.mark.parametrize("path,body", [
    ("/v1/completions", {"prompt": "Tell me a story", **LONG}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell me a story"}],
                              **LONG}),
])
def test_deadline_ends_openai_streams_with_abort(path, body):
    s = ServerProcess(["--shutdown-timeout", "0.5"])
    try:
        s.wait_ready()
        sock, first = open_stream(s, path, body)
        start = time.time()
        s.proc.send_signal(signal.SIGTERM)
        events = finish(s, sock, first)
        assert time.time() - start < 15
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        reasons = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
        assert reasons[-1] == "abort", chunks[-2:]
    finally:
        s.stop()


def test_deadline_ends_tgi_stream_with_final_event():
    s = ServerProcess(["--shutdown-timeout", "0.5"])
    try:
        s.wait_ready()
        sock, first = open_stream(s, "/generate_stream", {
            "inputs": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,",  # a count goes on for a while
            "parameters": {"max_new_tokens": 450}})
        s.proc.send_signal(signal.SIGTERM)
        events = [json.loads(e) for e in finish(s, sock, first)]
        last = events[-1]
        assert isinstance(last["generated_text"], str)
        assert last["details"]["finish_reason"] in ("length", "eos_token", "stop_sequence")
        assert all(e["details"] is None for e in events[:-1])
    finally:
        s.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_second_signal_aborts_at_once(sig):
    s = ServerProcess(["--shutdown-timeout", "120"])
    try:
        s.wait_ready()
        sock, first = open_stream(s, "/v1/completions", {"prompt": "Tell me a story", **LONG})
        start = time.time()
        s.proc.send_signal(sig)
        time.sleep(0.2)
        assert s.proc.poll() is None  # draining
        s.proc.send_signal(sig)
        events = finish(s, sock, first)
        assert time.time() - start < 10
        assert events[-1] == "[DONE]"
        assert json.loads(events[-2])["choices"][0]["finish_reason"] == "abort"
    finally:
        s.stop()
