"""Text Generation Inference's /generate and /generate_stream shapes."""

import json

import requests

from conftest import post_json, sse_events


def test_generate_plain(base_url):
    r = post_json(base_url + "/generate", {"inputs": "The capital of France is",
                                           "parameters": {"max_new_tokens": 4}})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"generated_text"}
    assert body["generated_text"]


def test_generate_details(base_url):
    r = post_json(base_url + "/generate", {
        "inputs": "The capital of France is",
        "parameters": {"max_new_tokens": 4, "details": True, "top_n_tokens": 2,
                       "decoder_input_details": False}})
    body = r.json()
    d = body["details"]
    assert d["finish_reason"] in ("length", "eos_token", "stop_sequence")
    assert d["generated_tokens"] == len(d["tokens"]) <= 4
    assert d["seed"] is None  # greedy
    assert d["prefill"] == []
    for t in d["tokens"]:
        assert set(t) == {"id", "text", "logprob", "special"}
        assert isinstance(t["id"], int) and t["logprob"] <= 0 and t["special"] is False
    assert "".join(t["text"] for t in d["tokens"]) == body["generated_text"]
    assert len(d["top_tokens"]) == len(d["tokens"])
    assert all(len(top) == 2 for top in d["top_tokens"])


def test_generate_sampling_reports_seed(base_url):
    body = post_json(base_url + "/generate", {
        "inputs": "Hello", "parameters": {"max_new_tokens": 3, "do_sample": True, "seed": 5,
                                          "details": True, "temperature": 0.8}}).json()
    assert body["details"]["seed"] == 5
    again = post_json(base_url + "/generate", {
        "inputs": "Hello", "parameters": {"max_new_tokens": 3, "do_sample": True, "seed": 5,
                                          "details": True, "temperature": 0.8}}).json()
    assert again["generated_text"] == body["generated_text"]
    drawn = post_json(base_url + "/generate", {
        "inputs": "Hello", "parameters": {"max_new_tokens": 2, "do_sample": True,
                                          "details": True}}).json()
    assert isinstance(drawn["details"]["seed"], int)


def test_generate_return_full_text_and_stop(base_url):
    plain = post_json(base_url + "/generate", {"inputs": "One, two, three,",
                                               "parameters": {"max_new_tokens": 6}}).json()
    full = post_json(base_url + "/generate", {"inputs": "One, two, three,",
                                              "parameters": {"max_new_tokens": 6,
                                                             "return_full_text": True}}).json()
    assert full["generated_text"] == "One, two, three," + plain["generated_text"]
    text = plain["generated_text"]
    stop = text.strip()[:2]
    stopped = post_json(base_url + "/generate", {
        "inputs": "One, two, three,",
        "parameters": {"max_new_tokens": 6, "stop": [stop], "details": True}}).json()
    assert stopped["details"]["finish_reason"] == "stop_sequence"
    assert stop not in stopped["generated_text"]


def test_generate_stream(base_url):
    r = requests.post(base_url + "/generate_stream", json={
        "inputs": "The capital of France is", "parameters": {"max_new_tokens": 4}},
        stream=True, timeout=60)
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(e) for e in sse_events(r.text)]
    assert len(events) >= 1
    for i, e in enumerate(events):
        assert e["index"] == i + 1
        assert set(e["token"]) == {"id", "text", "logprob", "special"}
    for e in events[:-1]:
        assert e["generated_text"] is None and e["details"] is None
    last = events[-1]
    assert last["generated_text"] == "".join(e["token"]["text"] for e in events)
    assert last["details"]["finish_reason"] in ("length", "eos_token", "stop_sequence")
    assert last["details"]["generated_tokens"] == len(events)
    whole = post_json(base_url + "/generate", {"inputs": "The capital of France is",
                                               "parameters": {"max_new_tokens": 4}}).json()
    assert whole["generated_text"] == last["generated_text"]


def test_tgi_validation(base_url):
    for params in ({"temperature": 0}, {"top_p": 1.0}, {"top_k": 0}, {"max_new_tokens": 0},
                   {"max_new_tokens": "5"}):
        r = post_json(base_url + "/generate", {"inputs": "x", "parameters": params})
        assert r.status_code == 400, params
        assert r.json()["error"]["type"] == "BadRequestError"
