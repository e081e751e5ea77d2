"""A request that fails inside the engine is an error on every route, and the server stays up.

The model is the default GGUF with its final norm's weights set to NaN, so every logit is NaN:
the sampler refuses the row (greedy or not) and the request finishes with FinishReason::kError.
Whole responses answer 500 "internal server error"; streams (already 200) send an error event,
OpenAI's with [DONE] after it. The engine's message (with its source location) stays in the log.
"""

import json
import shutil
import struct

import pytest
import requests

from conftest import MODEL, ServerProcess, post_json, sse_events

gguf = pytest.importorskip("gguf")

ROUTES = [
    ("/v1/completions", {"prompt": "Hello", "max_tokens": 4, "temperature": 0}),
    ("/v1/completions", {"prompt": "Hello", "max_tokens": 4}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                              "temperature": 0}),
]


@pytest.fixture(scope="module")
def nan_server(tmp_path_factory):
    if not MODEL.exists():
        pytest.skip(f"skipped: {MODEL} not found (run scripts/fetch_model.sh)")
    path = tmp_path_factory.mktemp("nan") / "nan-weights.gguf"
    shutil.copyfile(MODEL, path)
    reader = gguf.GGUFReader(str(MODEL))
    norm = next(t for t in reader.tensors if t.name == "output_norm.weight")
    assert norm.tensor_type == gguf.GGMLQuantizationType.F32
    offset, count = int(norm.data_offset), int(norm.n_elements)
    del reader
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(struct.pack(f"<{count}f", *([float("nan")] * count)))
    s = ServerProcess(model=path)
    s.wait_ready()
    yield s
    rc = s.stop()
    assert rc == 0, "".join(s.log[-50:])


def assert_internal_error(r):
    assert r.status_code == 500, r.text
    error = r.json()["error"]
    assert error["message"] == "internal server error"
    assert error["type"] == "InternalServerError"


@pytest.mark.parametrize("path,body", ROUTES)
def test_openai_whole_response_is_a_500(nan_server, path, body):
    assert_internal_error(post_json(nan_server.url + path, body))


@pytest.mark.parametrize("path,body", ROUTES)
def test_openai_stream_sends_an_error_event(nan_server, path, body):
    r = post_json(nan_server.url + path, {**body, "stream": True})
    assert r.status_code == 200
    events = sse_events(r.text)
    assert events[-1] == "[DONE]"
    errors = [json.loads(e)["error"] for e in events[:-1] if "error" in json.loads(e)]
    assert errors == [{"message": "internal server error", "type": "InternalServerError",
                       "param": None, "code": 500}], events


@pytest.mark.parametrize("parameters", [{"max_new_tokens": 4},
                                        {"max_new_tokens": 4, "do_sample": True, "seed": 3}])
def test_tgi_generate_is_a_500(nan_server, parameters):
    r = post_json(nan_server.url + "/generate", {"inputs": "Hello", "parameters": parameters})
    assert r.status_code == 500, r.text
    assert "internal server error" in r.text


def test_tgi_generate_stream_sends_an_error_event(nan_server):
    r = post_json(nan_server.url + "/generate_stream",
                  {"inputs": "Hello", "parameters": {"max_new_tokens": 4}})
    assert r.status_code == 200
    events = [json.loads(e) for e in sse_events(r.text)]
    assert events[-1] == {"error": "internal server error", "error_type": "generation"}, events
    assert not any(e.get("generated_text") for e in events[:-1])


def test_the_server_stays_up_and_logs_the_cause(nan_server):
    for _ in range(2):
        assert_internal_error(post_json(nan_server.url + "/v1/completions",
                                        {"prompt": "again", "max_tokens": 2}))
    assert requests.get(nan_server.url + "/health", timeout=10).status_code == 200
    assert nan_server.proc.poll() is None
    assert any("non-finite logit" in line for line in nan_server.log), "".join(nan_server.log[-20:])
    m = nan_server.metrics()
    assert m["inflight_num_requests_running"] == 0
    assert m["inflight_num_requests_waiting"] == 0
