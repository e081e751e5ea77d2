"""What keeps a web page from driving a server on the user's machine: JSON content types only
(415 otherwise), the Host check against DNS rebinding, and CORS off unless --allowed-origins."""

import json

import pytest

from conftest import ServerProcess
from raw_http import exchange, parse_responses, request

BODY = json.dumps({"prompt": "Hi", "max_tokens": 1}).encode()


def one(port, payload, timeout=60):
    data, _ = exchange(port, payload, timeout)
    responses = parse_responses(data)
    assert len(responses) == 1, data
    return responses[0]


def post(port, content_type=None, extra=()):
    headers = [("Connection", "close"), *extra]
    if content_type is not None:
        headers.append(("Content-Type", content_type))
    return request("POST", "/v1/completions", port, headers, BODY)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "text/json"])
def test_non_json_content_type_is_415(server, content_type):
    status, headers, body = one(server.port, post(server.port, content_type))
    assert status == 415, body
    assert headers["content-type"].startswith("application/json")
    err = json.loads(body)["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == 415


@pytest.mark.parametrize("content_type", [None, "application/json",
                                          "application/json; charset=utf-8",
                                          "application/vnd.example+json"])
def test_json_content_types_are_served(server, content_type):
    status, _, body = one(server.port, post(server.port, content_type))
    assert status == 200, body


@pytest.mark.parametrize("host", [b"attacker.example", b"attacker.example:%d", b"localhost:1",
                                  b"127.0.0.2:%d"])
def test_foreign_host_is_400_on_loopback(server, host):
    host = host.replace(b"%d", str(server.port).encode())
    payload = b"GET /v1/models HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n"
    status, _, body = one(server.port, payload)
    assert status == 400, body
    assert json.loads(body)["error"]["message"] == "Invalid host header"


@pytest.mark.parametrize("host", [b"localhost", b"localhost:%d", b"127.0.0.1", b"[::1]:%d"])
def test_served_names_pass(server, host):
    host = host.replace(b"%d", str(server.port).encode())
    payload = b"GET /v1/models HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n"
    assert one(server.port, payload)[0] == 200


def test_allowed_hosts_flag():
    s = ServerProcess(["--allowed-hosts", "api.example,proxy.example:8443"])
    try:
        s.wait_ready()
        for host, want in ((b"api.example", 200), (b"api.example:443", 200),
                           (b"proxy.example:8443", 200), (b"proxy.example", 400),
                           (b"attacker.example", 400), (b"localhost", 200)):
            payload = b"GET /health HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n"
            assert one(s.port, payload)[0] == want, host
    finally:
        assert s.stop() == 0


def preflight(port, origin):
    return request("OPTIONS", "/v1/chat/completions", port, [
        ("Origin", origin), ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "content-type, x-stainless-os"),
        ("Connection", "close")])


def test_cors_off_by_default(server):
    status, headers, _ = one(server.port, preflight(server.port, "https://app.example"))
    assert status == 405  # as before: no route takes OPTIONS
    assert not any(h.startswith("access-control-") for h in headers)
    _, headers, _ = one(server.port, request("GET", "/v1/models", server.port,
                                             [("Origin", "https://app.example"),
                                              ("Connection", "close")]))
    assert not any(h.startswith("access-control-") for h in headers)


def test_cors_allowed_origins():
    s = ServerProcess(["--allowed-origins", "https://app.example,https://other.example"])
    try:
        s.wait_ready()
        status, headers, body = one(s.port, preflight(s.port, "https://app.example"))
        assert status == 204 and body == b""
        assert headers["access-control-allow-origin"] == "https://app.example"
        assert headers["vary"] == "Origin"
        assert "POST" in headers["access-control-allow-methods"]
        allowed = [h.strip() for h in headers["access-control-allow-headers"].split(",")]
        assert {"authorization", "content-type", "x-stainless-os"} <= set(allowed)
        assert int(headers["access-control-max-age"]) > 0

        status, headers, _ = one(s.port, post(s.port, "application/json",
                                              [("Origin", "https://other.example")]))
        assert status == 200
        assert headers["access-control-allow-origin"] == "https://other.example"
        assert headers["vary"] == "Origin"

        status, headers, _ = one(s.port, preflight(s.port, "https://evil.example"))
        assert status == 405 and "access-control-allow-origin" not in headers
        _, headers, _ = one(s.port, request("GET", "/v1/models", s.port,
                                            [("Origin", "https://evil.example"),
                                             ("Connection", "close")]))
        assert "access-control-allow-origin" not in headers
    finally:
        assert s.stop() == 0


def test_cors_any_origin():
    s = ServerProcess(["--allowed-origins", "*"])
    try:
        s.wait_ready()
        _, headers, _ = one(s.port, request("GET", "/v1/models", s.port,
                                            [("Origin", "https://x.example"),
                                             ("Connection", "close")]))
        assert headers["access-control-allow-origin"] == "*"
    finally:
        assert s.stop() == 0
