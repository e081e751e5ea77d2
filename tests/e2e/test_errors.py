"""Bad input of every kind gets OpenAI's error shape with the right status, never a crash or a
hung connection; the server answers correctly afterwards."""

import json
import socket

import openai
import pytest
import requests

from conftest import MAX_MODEL_LEN, ServerProcess, post_json


def assert_error(r, status, param=None):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["code"] == status
    assert isinstance(err["message"], str) and err["message"]
    if param is not None:
        assert err["param"] == param
    return err


def test_malformed_json(base_url):
    for path in ("/v1/completions", "/v1/chat/completions", "/generate", "/tokenize"):
        r = requests.post(base_url + path, data="{\"prompt\": ", timeout=10,
                          headers={"Content-Type": "application/json"})
        assert assert_error(r, 400)["type"] == "BadRequestError"
        assert_error(requests.post(base_url + path, data="[1, 2]", timeout=10), 400)
        assert_error(requests.post(base_url + path, data="", timeout=10), 400)


@pytest.mark.parametrize("field,value", [
    ("temperature", -0.5), ("temperature", "hot"), ("top_p", 0), ("top_p", 1.5), ("n", 0),
    ("max_tokens", 0), ("max_tokens", -1), ("max_tokens", "ten"), ("logprobs", 100),
    ("presence_penalty", 5), ("frequency_penalty", -3), ("top_k", -5), ("min_p", 1.5),
    ("repetition_penalty", 0), ("stop", 7), ("seed", "x"), ("stream", "yes"),
    ("best_of", 3), ("stop_token_ids", [10 ** 9]),
])
def test_completion_bad_fields(base_url, field, value):
    body = {"prompt": "Hi", "max_tokens": 2, field: value}
    assert_error(post_json(base_url + "/v1/completions", body), 400, param=field)


def test_bad_prompts(base_url):
    for prompt in (None, "", [], [[]], 5, [1.5], [{"a": 1}], [10 ** 9]):
        body = {"max_tokens": 2} if prompt is None else {"prompt": prompt, "max_tokens": 2}
        assert_error(post_json(base_url + "/v1/completions", body), 400, param="prompt")


def test_bad_messages(base_url):
    for messages in (None, [], "hi", [{"content": "x"}], [{"role": "robot", "content": "x"}],
                     [{"role": "user"}], [{"role": "user", "content": 5}],
                     [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]):
        body = {"max_tokens": 2} if messages is None else {"messages": messages, "max_tokens": 2}
        r = post_json(base_url + "/v1/chat/completions", body)
        assert_error(r, 400)
        assert r.json()["error"]["param"].startswith("messages")


def test_prompt_longer_than_model_allows(client, model_name, base_url):
    long_prompt = "hello " * (MAX_MODEL_LEN + 10)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model_name, prompt=long_prompt, max_tokens=2)
    assert "maximum context length" in e.value.response.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=model_name, max_tokens=2,
                                       messages=[{"role": "user", "content": long_prompt}])
    # Prompt fits but prompt + max_tokens does not.
    r = post_json(base_url + "/v1/completions", {"prompt": "hello " * (MAX_MODEL_LEN - 20),
                                                 "max_tokens": 100})
    assert_error(r, 400, param="max_tokens")
    r = post_json(base_url + "/generate", {"inputs": long_prompt})
    assert_error(r, 400)


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.completions.create(model="no-such-model", prompt="Hi", max_tokens=2)
    err = e.value.response.json()["error"]
    assert err["type"] == "NotFoundError" and err["param"] == "model"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", max_tokens=2,
                                       messages=[{"role": "user", "content": "x"}])


def test_unknown_route_and_wrong_method(base_url):
    assert_error(requests.get(base_url + "/v1/nope", timeout=10), 404)
    assert_error(requests.post(base_url + "/nope", data="{}", timeout=10), 404)
    r = requests.get(base_url + "/v1/completions", timeout=10)
    assert_error(r, 405)
    assert r.headers["allow"] == "POST"
    assert_error(requests.delete(base_url + "/v1/models", timeout=10), 405)
    assert_error(requests.post(base_url + "/health", timeout=10), 405)


def test_body_too_large_is_413(base_url):
    big = json.dumps({"prompt": "x" * (2 << 20), "max_tokens": 1})
    r = requests.post(base_url + "/v1/completions", data=big, timeout=30,
                      headers={"Content-Type": "application/json"})
    assert_error(r, 413)


def raw_exchange(base_url, payload, timeout=5.0):
    """Sends raw bytes; returns everything the server sends before closing (or the timeout)."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(payload)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except socket.timeout:
            pass
        return out


def test_malformed_http_over_raw_sockets(base_url):
    for payload in (b"NONSENSE\r\n\r\n", b"GET / HTTP/7.0\r\n\r\n",
                    b"POST /v1/completions HTTP/1.1\r\nContent-Length: zz\r\n\r\n",
                    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\nzzz\r\n"):
        out = raw_exchange(base_url, payload)
        assert out.startswith(b"HTTP/1.1 400"), (payload, out)
    out = raw_exchange(base_url, b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 100_000 +
                       b"\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 431"), out[:100]
    # Half a request, then the client goes away: the server must not hang or crash.
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")


def test_engine_rejects_are_400(base_url):
    # min_tokens above max_tokens, and top_logprobs without logprobs.
    assert_error(post_json(base_url + "/v1/completions",
                           {"prompt": "Hi", "max_tokens": 2, "min_tokens": 5}), 400)
    assert_error(post_json(base_url + "/v1/chat/completions",
                           {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}),
                 400, param="top_logprobs")
    assert_error(post_json(base_url + "/v1/completions",
                           {"prompt": "x", "stream": False,
                            "stream_options": {"include_usage": True}}), 400,
                 param="stream_options")


def test_server_still_answers_correctly(client, model_name):
    r = client.completions.create(model=model_name, prompt="The capital of France is",
                                  max_tokens=3, temperature=0)
    assert r.choices[0].text and r.usage.completion_tokens <= 3


@pytest.fixture(scope="module")
def keyed_server():
    s = ServerProcess(["--api-key", "sk-test-123", "--max-concurrent-requests", "2"])
    s.wait_ready()
    yield s
    assert s.stop() == 0


def test_api_key(keyed_server, model_name):
    bad = openai.OpenAI(base_url=keyed_server.url + "/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        bad.completions.create(model=model_name, prompt="Hi", max_tokens=1)
    assert e.value.response.json()["error"]["type"] == "AuthenticationError"
    for headers in ({}, {"Authorization": "sk-test-123"}, {"Authorization": "Bearer sk-test-12"},
                    {"Authorization": "Bearer sk-test-1234"}):
        r = requests.post(keyed_server.url + "/v1/completions", headers=headers, timeout=10,
                          json={"prompt": "Hi", "max_tokens": 1})
        assert_error(r, 401)
    for path in ("/generate", "/tokenize"):
        assert_error(requests.post(keyed_server.url + path, json={}, timeout=10), 401)
    good = openai.OpenAI(base_url=keyed_server.url + "/v1", api_key="sk-test-123", max_retries=0)
    assert good.completions.create(model=model_name, prompt="Hi", max_tokens=1).choices
    # Probes and scrapers need no key.
    assert requests.get(keyed_server.url + "/health", timeout=10).status_code == 200
    assert requests.get(keyed_server.url + "/metrics", timeout=10).status_code == 200


def test_queue_full_is_429(keyed_server):
    headers = {"Authorization": "Bearer sk-test-123"}
    body = {"prompt": "Tell me a long story", "max_tokens": 400, "ignore_eos": True,
            "stream": True}
    streams = [requests.post(keyed_server.url + "/v1/completions", json=body, headers=headers,
                             stream=True, timeout=60) for _ in range(2)]
    try:
        for s in streams:
            assert s.status_code == 200
        r = requests.post(keyed_server.url + "/v1/completions", headers=headers, timeout=10,
                          json={"prompt": "Hi", "max_tokens": 1})
        err = assert_error(r, 429)
        assert err["type"] == "RateLimitError"
        assert keyed_server.metrics()["inflight_http_requests_rejected_total"] >= 1
    finally:
        for s in streams:
            s.close()
