"""Request smuggling (RFC 9112 section 6.3): a request whose body length could be read two ways
is answered 400 and its connection closed, so nothing in it can run as a second request."""

import pytest

from raw_http import exchange, host_header, parse_responses

# What an attacker hides in the body: a request of its own.
SMUGGLED = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def post_with(port, framing, version=b"1.1", body=SMUGGLED):
    return (b"POST /v1/completions HTTP/" + version + b"\r\nHost: " + host_header(port) +
            b"\r\nContent-Type: application/json\r\n" + framing + b"\r\n" + body)


@pytest.mark.parametrize("framing", [
    b"Transfer-Encoding: gzip\r\nContent-Length: %d\r\n",
    b"Transfer-Encoding: chunked, identity\r\nContent-Length: %d\r\n",
    b"Transfer-Encoding: xchunked\r\nContent-Length: %d\r\n",
    b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n",
    b"Content-Length: %d\r\nContent-Length: 0\r\n",
    b"Content-Length: 0, %d\r\n",
], ids=["gzip", "chunked-identity", "xchunked", "te-and-cl", "two-cl", "cl-list"])
def test_ambiguous_length_is_400_and_closes(server, framing):
    framing = framing.replace(b"%d", str(len(SMUGGLED)).encode())
    data, closed = exchange(server.port, post_with(server.port, framing))
    responses = parse_responses(data)
    assert [r[0] for r in responses] == [400], data
    assert b'"code":400' in responses[0][2]
    assert closed


def test_transfer_encoding_on_http10_is_400(server):
    framing = b"Transfer-Encoding: chunked\r\n"
    body = b"%x\r\n" % len(SMUGGLED) + SMUGGLED + b"\r\n0\r\n\r\n"
    data, closed = exchange(server.port, post_with(server.port, framing, b"1.0", body))
    assert [r[0] for r in parse_responses(data)] == [400], data
    assert closed


def test_plain_chunked_body_still_works(server):
    body = b'{"prompt": "Hi", "max_tokens": 1}'
    payload = post_with(server.port, b"Transfer-Encoding: chunked\r\nConnection: close\r\n",
                        body=b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
    data, closed = exchange(server.port, payload, timeout=60)
    assert [r[0] for r in parse_responses(data)] == [200], data
