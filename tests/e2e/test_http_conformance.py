"""HTTP/1.1 conformance over raw sockets: Host is required (once), HEAD answers as GET without
a body, and a body shorter than its Content-Length gets 408 after the read timeout."""

import time

import pytest

from conftest import ServerProcess
from raw_http import connect, exchange, host_header, parse_responses, read_all, request


@pytest.mark.parametrize("payload", [
    b"GET /health HTTP/1.1\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\nHost: localhost\r\n\r\n",
], ids=["no-host", "two-hosts", "two-hosts-1.0"])
def test_host_required_once(server, payload):
    data, closed = exchange(server.port, payload)
    assert [r[0] for r in parse_responses(data)] == [400], data
    assert closed


def test_http10_with_one_host_is_served(server):
    data, _ = exchange(server.port, b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    assert parse_responses(data)[0][0] == 200


@pytest.mark.parametrize("path", ["/health", "/v1/models", "/metrics", "/version"])
def test_head_is_get_without_body(server, path):
    # HEAD then GET on one connection: if the HEAD answer carried a body, the GET's answer
    # would not start where the HEAD's head ends.
    get = request("GET", path, server.port, [("Connection", "close")])
    data, _ = exchange(server.port, request("HEAD", path, server.port) + get)
    head_part, _, rest = data.partition(b"\r\n\r\n")
    assert head_part.startswith(b"HTTP/1.1 200"), data[:200]
    assert rest.startswith(b"HTTP/1.1 200"), data[:400]
    head_headers = dict(line.split(": ", 1) for line in head_part.decode().split("\r\n")[1:])
    [(status, get_headers, body)] = parse_responses(rest)
    assert head_headers["Content-Type"] == get_headers["content-type"]
    if path != "/metrics":  # its body changes between the two requests
        assert int(head_headers["Content-Length"]) == len(body)


def test_truncated_body_is_408():
    s = ServerProcess(["--read-timeout", "1"])
    try:
        s.wait_ready()
        with connect(s.port) as sock:
            start = time.time()
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: " + host_header(s.port) +
                         b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
            data, closed = read_all(sock, timeout=10)
            elapsed = time.time() - start
        [(status, headers, body)] = parse_responses(data)
        assert status == 408, data
        assert b'"code":408' in body
        assert closed
        assert 0.8 < elapsed < 6
    finally:
        assert s.stop() == 0
