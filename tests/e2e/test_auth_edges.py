"""API-key edges: an empty --api-key is refused at start, a non-loopback bind without a key is
warned about, and two Authorization headers are refused."""

import json
import subprocess

from conftest import BIN, MODEL, ServerProcess
from raw_http import exchange, parse_responses, request

import pytest


def run_serve(*args, timeout=30):
    if not BIN.exists():
        pytest.skip(f"skipped: {BIN} not built (set INFLIGHT_BIN)")
    return subprocess.run([str(BIN), "serve", "--model", str(MODEL), "--port", "0",
                           "--grpc-port", "0", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_empty_api_key_is_refused():
    r = run_serve("--host", "127.0.0.1", "--api-key", "")
    assert r.returncode != 0
    assert "--api-key is empty" in r.stdout + r.stderr


def test_non_loopback_without_key_warns():
    # 192.0.2.1 (TEST-NET-1) is never a local address: the bind fails after the warning, so
    # nothing is ever exposed.
    r = run_serve("--host", "192.0.2.1")
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "without --api-key: anyone who can reach this port can use the server" in out


def test_two_authorization_headers_are_401():
    s = ServerProcess(["--api-key", "s3cret"])
    try:
        s.wait_ready()

        def status(*auth):
            headers = [("Authorization", a) for a in auth] + [("Connection", "close")]
            data, _ = exchange(s.port, request("GET", "/v1/models", s.port, headers), 30)
            [(code, _, body)] = parse_responses(data)
            return code

        assert status("Bearer s3cret") == 200
        assert status("Bearer s3cret", "Bearer wrong") == 401
        assert status("Bearer wrong", "Bearer s3cret") == 401
        assert status("Bearer s3cret", "Bearer s3cret") == 401
        assert status() == 401
    finally:
        assert s.stop() == 0
