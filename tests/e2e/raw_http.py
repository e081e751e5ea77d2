"""HTTP/1.1 over a plain socket, for tests that must send what no client library would: every
call is bounded by `timeout` and talks to 127.0.0.1 only."""

import socket
import time


def host_header(port):
    return f"127.0.0.1:{port}".encode()


def connect(port, timeout=10.0):
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def read_all(s, timeout=10.0, until=None):
    """Reads until the server closes, `until(data)` holds, or `timeout`; returns (data, closed)."""
    data = b""
    deadline = time.time() + timeout
    while time.time() < deadline and not (until and until(data)):
        s.settimeout(max(0.01, min(0.5, deadline - time.time())))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def exchange(port, payload, timeout=10.0):
    """Sends raw bytes; returns (everything received, whether the server closed)."""
    with connect(port, timeout) as s:
        s.sendall(payload)
        return read_all(s, timeout)


def parse_responses(data):
    """Splits a byte stream into [(status, headers, body)]; headers lower-cased; chunked bodies
    are decoded (a body cut short is returned as far as it went)."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line, sep, rest = rest.partition(b"\r\n")
                if not sep:
                    break
                size = int(size_line.split(b";")[0], 16)
                body += rest[:size]
                rest = rest[size + 2:]
                if size == 0:
                    break
        elif "content-length" in headers and status not in (204, 304):
            n = int(headers["content-length"])
            body, rest = rest[:n], rest[n:]
        out.append((status, headers, body))
        data = rest
    return out


def request(method, path, port, headers=(), body=b"", version="1.1"):
    """A request with Host and, for a body, Content-Length; `headers` are extra (name, value)."""
    lines = [f"{method} {path} HTTP/{version}".encode(), b"Host: " + host_header(port)]
    lines += [f"{k}: {v}".encode() for k, v in headers]
    if body:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body
