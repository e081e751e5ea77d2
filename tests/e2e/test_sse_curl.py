"""SSE framing as a plain HTTP client sees it, with curl."""

import json
import shutil
import subprocess

import pytest

from conftest import sse_events


# curl -d alone sends application/x-www-form-urlencoded, which JSON routes answer 415.
JSON = ("-H", "Content-Type: application/json")


def curl(*args):
    if not shutil.which("curl"):
        pytest.skip("curl not installed")
    # Bytes, decoded by hand: text mode would turn the header's CRLFs into LFs.
    return subprocess.run(["curl", "-sS", "-N", "-D", "-", *args], capture_output=True,
                          timeout=120, check=True).stdout.decode()


def split_head(out):
    head, _, body = out.partition("\r\n\r\n")
    return head.lower(), body


@pytest.mark.parametrize("path,body", [
    ("/v1/completions", {"prompt": "Hello", "max_tokens": 4, "stream": True, "temperature": 0}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                              "stream": True, "temperature": 0}),
])
def test_openai_sse_framing(base_url, path, body):
    head, body_text = split_head(curl(base_url + path, "-H", "Content-Type: application/json",
                                      "-d", json.dumps(body)))
    assert head.startswith("http/1.1 200")
    assert "content-type: text/event-stream" in head
    assert "transfer-encoding: chunked" in head
    assert "cache-control: no-cache" in head
    # Every event is exactly one `data: ` line followed by a blank line.
    assert body_text.endswith("data: [DONE]\n\n")
    blocks = body_text.split("\n\n")
    assert blocks[-1] == ""
    for block in blocks[:-1]:
        assert block.startswith("data: ") and "\n" not in block, repr(block)
    events = sse_events(body_text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_include_usage_final_chunk(base_url):
    _, body_text = split_head(curl(base_url + "/v1/completions", *JSON, "-d", json.dumps(
        {"prompt": "Hello", "max_tokens": 3, "stream": True,
         "stream_options": {"include_usage": True}})))
    chunks = [json.loads(e) for e in sse_events(body_text)[:-1]]
    assert all("usage" in c for c in chunks)
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 3


def test_tgi_sse_framing(base_url):
    head, body_text = split_head(curl(base_url + "/generate_stream", *JSON, "-d", json.dumps(
        {"inputs": "Hello", "parameters": {"max_new_tokens": 3}})))
    assert "content-type: text/event-stream" in head
    events = [json.loads(e) for e in sse_events(body_text)]
    assert "[DONE]" not in body_text  # TGI sends no end marker
    assert [e["index"] for e in events] == [1, 2, 3]
    assert events[-1]["generated_text"] == "".join(e["token"]["text"] for e in events)
