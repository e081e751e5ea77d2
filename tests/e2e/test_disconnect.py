"""A client that disconnects cancels its request in the engine at once, freeing its KV blocks."""

import json
import socket
import time

import requests

from conftest import TIMEOUT, post_json

STREAMS = 50


def open_stream(base_url, body):
    host, port = base_url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    payload = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: " + host.encode() +
              b"\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    return s


def read_until(s, marker, limit=1 << 20):
    buf = b""
    while marker not in buf and len(buf) < limit:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def wait_for(server, cond, timeout):
    deadline = time.time() + timeout
    m = server.metrics()
    while not cond(m) and time.time() < deadline:
        time.sleep(0.02)
        m = server.metrics()
    return m


def test_50_streams_closed_mid_generation_free_everything(server, base_url):
    # 50 x (9 + 100) tokens fit the shared server's KV cache (364 blocks of 16), so admission
    # runs all 50 at once, whatever share of max_tokens it reserves for growth.
    body = {"prompt": "Write a very long story about a dragon.", "max_tokens": 100,
            "ignore_eos": True, "stream": True, "temperature": 0.8}
    before = server.metrics()
    socks = [open_stream(base_url, {**body, "seed": i}) for i in range(STREAMS)]
    # Every stream has produced text: all 50 are mid-generation.
    for s in socks:
        got = read_until(s, b'"text":"')
        assert b"HTTP/1.1 200" in got
    m = server.metrics()
    assert m["inflight_num_requests_running"] == STREAMS
    assert m["inflight_kv_cache_used_blocks"] > 0
    steps = (m["inflight_engine_step_seconds_sum"], m["inflight_engine_step_seconds_count"])
    closed_at = time.time()
    for s in socks:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()  # linger 0: a reset, like a killed client
    # The server sees every disconnect and cancels at once...
    m = wait_for(server, lambda m: m["inflight_http_client_disconnects_total"] -
                 before["inflight_http_client_disconnects_total"] == STREAMS, timeout=5)
    detected = time.time() - closed_at
    assert detected < 1.0, f"took {detected:.2f} s to see the disconnects"
    # ...and the engine frees the blocks within a second: the step in flight, whose every request
    # is now cancelled, is abandoned between two layers rather than finished.
    m = wait_for(server, lambda m: m["inflight_num_requests_running"] == 0 and
                 m["inflight_num_requests_waiting"] == 0 and
                 m["inflight_kv_cache_used_blocks"] == 0, timeout=30)
    freed = time.time() - closed_at
    assert m["inflight_num_requests_running"] == 0
    assert m["inflight_num_requests_waiting"] == 0
    assert m["inflight_kv_cache_used_blocks"] == 0
    step = (m["inflight_engine_step_seconds_sum"] - steps[0]) / max(
        1.0, m["inflight_engine_step_seconds_count"] - steps[1])
    assert freed < 1.0, f"freed after {freed:.2f} s (engine steps {step:.2f} s)"
    aborted = 'inflight_request_success_total{finished_reason="abort"}'
    assert m[aborted] - before[aborted] == STREAMS
    assert m["inflight_http_client_disconnects_total"] - before[
        "inflight_http_client_disconnects_total"] == STREAMS
    assert m["inflight_http_requests_in_flight"] == 0
    # And the server still serves.
    r = post_json(base_url + "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
    assert r.status_code == 200


def test_non_streaming_disconnect_cancels(server, base_url):
    before = server.metrics()
    s = open_stream(base_url, {"prompt": "Tell me everything.", "max_tokens": 400,
                               "ignore_eos": True})
    wait_for(server, lambda m: m["inflight_num_requests_running"] > 0, timeout=5)
    s.close()
    m = wait_for(server, lambda m: m["inflight_num_requests_running"] == 0 and
                 m["inflight_kv_cache_used_blocks"] == 0, timeout=2)
    assert m["inflight_kv_cache_used_blocks"] == 0
    assert m["inflight_http_client_disconnects_total"] == \
        before["inflight_http_client_disconnects_total"] + 1


def test_requests_client_closing_stream(server, base_url):
    r = requests.post(base_url + "/v1/chat/completions", stream=True, timeout=60, json={
        "messages": [{"role": "user", "content": "Count to a thousand."}], "max_tokens": 400,
        "ignore_eos": True, "stream": True})
    lines = r.iter_lines()
    assert next(lines).startswith(b"data: ")
    r.close()
    m = wait_for(server, lambda m: m["inflight_num_requests_running"] == 0, timeout=2)
    assert m["inflight_num_requests_running"] == 0
