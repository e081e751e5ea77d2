"""What vLLM and TGI users bring along: TGI's POST / and its Python client, vLLM's serve flags,
the access log and periodic engine line, unknown request fields (logged once, or refused with
--strict), TGI's best_of and truncate."""

import json
import re
import subprocess
import time

import pytest
import requests

from conftest import BIN, MODEL, SERVED_NAME, ServerProcess, post_json, sse_events


def wait_for_log(server, pattern, timeout=15):
    """The first log line matching `pattern`, waiting for it to appear."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for line in list(server.log):
            if re.search(pattern, line):
                return line
        time.sleep(0.05)
    raise AssertionError(f"no log line matches {pattern!r}:\n" + "".join(server.log[-30:]))


# ---- TGI --------------------------------------------------------------------------------------

def test_tgi_root_answers_a_list(base_url):
    body = {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 4}}
    r = post_json(base_url + "/", body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert isinstance(out, list) and len(out) == 1
    assert out[0]["generated_text"] == post_json(base_url + "/generate", body).json()[
        "generated_text"]


def test_tgi_root_streams_when_asked(base_url):
    r = post_json(base_url + "/", {"inputs": "Hello", "stream": True,
                                   "parameters": {"max_new_tokens": 3}})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(e) for e in sse_events(r.text)]
    assert events[-1]["generated_text"] == "".join(e["token"]["text"] for e in events)
    assert post_json(base_url + "/", {"inputs": "x", "stream": "yes"}).status_code == 400


def test_huggingface_hub_inference_client(base_url):
    hub = pytest.importorskip("huggingface_hub")
    c = hub.InferenceClient(base_url=base_url)
    text = c.text_generation("The capital of France is", max_new_tokens=6)
    assert text == post_json(base_url + "/generate", {
        "inputs": "The capital of France is",
        "parameters": {"max_new_tokens": 6}}).json()["generated_text"]
    detailed = c.text_generation("The capital of France is", max_new_tokens=6, details=True)
    assert detailed.generated_text == text
    assert detailed.details.generated_tokens == len(detailed.details.tokens)
    streamed = "".join(c.text_generation("The capital of France is", max_new_tokens=6,
                                         stream=True))
    assert streamed == text
    chat = c.chat_completion([{"role": "user", "content": "Say hi"}], max_tokens=8,
                             temperature=0)
    assert chat.choices[0].message.content
    chunks = [ch.choices[0].delta.content or "" for ch in
              c.chat_completion([{"role": "user", "content": "Say hi"}], max_tokens=8,
                                temperature=0, stream=True) if ch.choices]
    assert "".join(chunks) == chat.choices[0].message.content


def test_tgi_placeholder_model_names_but_no_others(base_url):
    msg = [{"role": "user", "content": "Hi"}]
    for name in ("tgi", "dummy", SERVED_NAME):
        r = post_json(base_url + "/v1/chat/completions",
                      {"model": name, "messages": msg, "max_tokens": 2})
        assert r.status_code == 200, (name, r.text)
    r = post_json(base_url + "/v1/chat/completions",
                  {"model": "gpt-4o", "messages": msg, "max_tokens": 2})
    assert r.status_code == 404


def test_tgi_best_of_answers_the_most_likely_sequence(base_url):
    r = post_json(base_url + "/generate", {
        "inputs": "Once upon a time",
        "parameters": {"max_new_tokens": 5, "best_of": 3, "do_sample": True, "details": True}})
    assert r.status_code == 200, r.text
    d = r.json()["details"]
    others = d["best_of_sequences"]
    assert len(others) == 2
    best = sum(t["logprob"] for t in d["tokens"])
    for seq in others:
        assert seq["generated_tokens"] == len(seq["tokens"])
        assert sum(t["logprob"] for t in seq["tokens"]) <= best + 1e-4
    # TGI's rules: sampling only, no seed, no stream.
    for params, field in (({"best_of": 2}, "best_of"),
                          ({"best_of": 2, "do_sample": True, "seed": 1}, "seed")):
        bad = post_json(base_url + "/generate", {"inputs": "x", "parameters": params})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == field
    bad = post_json(base_url + "/generate_stream", {
        "inputs": "x", "parameters": {"best_of": 2, "do_sample": True}})
    assert bad.status_code == 400


def test_tgi_truncate_keeps_the_last_tokens(base_url):
    long_prompt = "one two three four five six seven eight nine ten " * 4
    r = post_json(base_url + "/generate_stream", {
        "inputs": long_prompt, "parameters": {"max_new_tokens": 1, "truncate": 5}})
    assert json.loads(sse_events(r.text)[-1])["details"]["input_length"] == 5
    tail = post_json(base_url + "/tokenize", {"prompt": long_prompt})
    assert tail.status_code == 200
    ids = tail.json()["tokens"][-5:]
    same = post_json(base_url + "/v1/completions",
                     {"prompt": ids, "max_tokens": 4, "temperature": 0})
    truncated = post_json(base_url + "/generate", {
        "inputs": long_prompt, "parameters": {"max_new_tokens": 4, "truncate": 5}})
    assert truncated.json()["generated_text"] == same.json()["choices"][0]["text"]


def test_features_without_support_are_refused_naming_the_field(base_url):
    msg = [{"role": "user", "content": "Hi"}]
    r = post_json(base_url + "/v1/chat/completions", {
        "messages": msg, "max_tokens": 2, "functions": [{"name": "f", "parameters": {}}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "functions"
    assert "'tools'" in r.json()["error"]["message"]
    r = post_json(base_url + "/generate", {"inputs": "Hi", "parameters": {
        "max_new_tokens": 2, "adapter_id": "my-lora"}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "adapter_id"


# ---- logs and unknown fields ------------------------------------------------------------------

def test_access_log_line_per_request(server, base_url):
    post_json(base_url + "/v1/completions", {"prompt": "Hi", "max_tokens": 3, "temperature": 0,
                                             "user": "access-log-probe"})
    line = wait_for_log(server, r'"POST /v1/completions" 200 prompt_tokens=\d+ '
                                r'completion_tokens=3 cached_tokens=\d+ ttft=[\d.]+ms [\d.]+ms')
    assert re.search(r"127\.0\.0\.1:\d+ ", line)
    requests.get(base_url + "/v1/nope", timeout=10)
    wait_for_log(server, r'"GET /v1/nope" 404 [\d.]+ms')


def test_unknown_field_is_logged_once(server, base_url):
    for _ in range(2):
        r = post_json(base_url + "/v1/completions", {"prompt": "Hi", "max_tokens": 1,
                                                     "frobnicate_level": 3})
        assert r.status_code == 200
    wait_for_log(server, r"completions request field 'frobnicate_level' is not supported")
    assert sum("frobnicate_level" in line for line in server.log) == 1
    post_json(base_url + "/generate", {"inputs": "Hi", "parameters": {
        "max_new_tokens": 1, "frobnicate_depth": 1}})
    wait_for_log(server, r"TGI generate request field 'parameters.frobnicate_depth'")


@pytest.fixture(scope="module")
def strict_server():
    s = ServerProcess(["--strict", "--log-stats-interval", "0.2"])
    s.wait_ready()
    yield s
    assert s.stop() == 0


def test_strict_refuses_unknown_fields(strict_server):
    r = post_json(strict_server.url + "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "frobnicate": 1})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "frobnicate"
    ok = post_json(strict_server.url + "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1})
    assert ok.status_code == 200


def test_periodic_engine_line(strict_server):
    post_json(strict_server.url + "/v1/completions", {"prompt": "Hi", "max_tokens": 4})
    wait_for_log(strict_server, r"engine: prompt [\d.]+ tok/s, generation [\d.]+ tok/s, "
                                r"running \d+, waiting \d+, KV cache [\d.]+%, prefix cache hit "
                                r"rate [\d.]+%, preemptions \d+")


# ---- vLLM's serve command line ----------------------------------------------------------------

def serve_output(*args, timeout=60):
    """Runs `inflight serve ARGS` that is expected to exit at once; (exit code, output)."""
    p = subprocess.run([str(BIN), "serve", "--grpc-port", "0", *args], capture_output=True,
                       text=True,
                       timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def completion(url, **body):
    r = post_json(url + "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 8,
                                            **body})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def test_vllm_flags_and_positional_model():
    if not BIN.exists() or not MODEL.exists():
        pytest.skip("skipped: binary or model missing")
    texts = []
    for _ in range(2):
        # The model positionally, vLLM's flags, and a repeated option taking its last value.
        s = ServerProcess(["--seed", "1234", "--gpu-memory-utilization", "0.5", "--dtype", "auto",
                           "--enable-prefix-caching", "--log-level", "info", "--port", "1",
                           "--port", "0", "--disable-log-requests", "--trust-remote-code"],
                          model=MODEL)
        try:
            s.wait_ready()
            texts.append([completion(s.url, temperature=1.0) for _ in range(3)])
        finally:
            assert s.stop() == 0
        log = "".join(s.log)
        assert "gpu_memory_utilization applies to GPUs" in log  # the CPU backend says so
        assert '"POST /v1/completions"' not in log  # --disable-log-requests
    # --seed: request i of a run draws the same tokens in every run; requests differ.
    assert texts[0] == texts[1]
    assert len(set(texts[0])) > 1


def test_positional_model_and_refusals():
    if not BIN.exists() or not MODEL.exists():
        pytest.skip("skipped: binary or model missing")
    rc, out = serve_output(str(MODEL), "--model", "/elsewhere.gguf", "--port", "0")
    assert rc != 0 and "two models given" in out
    rc, out = serve_output(str(MODEL), "--port", "0", "--dtype", "float16",
                           "--kv-cache-memory", "64MiB", "--max-model-len", "256")
    assert rc != 0 and "--dtype float16" in out and "float32" in out
    rc, out = serve_output(str(MODEL), "--port", "0", "--gpu-memory-utilization", "1.5")
    assert rc != 0 and "gpu-memory-utilization" in out
    rc, out = serve_output(str(MODEL), "--log-level", "loud")
    assert rc != 0 and "log-level" in out


def test_positional_model_serves():
    if not BIN.exists() or not MODEL.exists():
        pytest.skip("skipped: binary or model missing")
    # No --grpc-port: with --port 0 the gRPC endpoint takes a free port of its own too.
    cmd = [str(BIN), "serve", str(MODEL), "--host", "127.0.0.1", "--port", "0",
           "--max-model-len", "256", "--kv-cache-memory", "64MiB"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = grpc_port = None
        for line in p.stdout:
            m = re.search(r"listening on [\d.]+:(\d+)", line)
            if m:
                port = int(m.group(1))
            m = re.search(r"grpc on [\d.]+:(\d+)", line)
            if m:
                grpc_port = int(m.group(1))
                break
        assert port and grpc_port and grpc_port != port
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        while requests.get(url + "/health", timeout=5).status_code != 200:
            assert time.time() < deadline
            time.sleep(0.1)
        name = requests.get(url + "/v1/models", timeout=5).json()["data"][0]["id"]
        assert name == MODEL.stem
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_stop_reason_as_vllm_reports_it(base_url):
    prompt = "The capital of France is"
    ids = [t["id"] for t in post_json(base_url + "/generate", {
        "inputs": prompt, "parameters": {"max_new_tokens": 3, "details": True}}).json()[
        "details"]["tokens"]]
    by_id = post_json(base_url + "/v1/completions", {
        "prompt": prompt, "max_tokens": 8, "temperature": 0, "stop_token_ids": [ids[1]]}).json()
    assert by_id["choices"][0]["finish_reason"] == "stop"
    assert by_id["choices"][0]["stop_reason"] == ids[1]
    by_text = post_json(base_url + "/v1/completions", {
        "prompt": prompt, "max_tokens": 8, "temperature": 0, "stop": ["Paris"]}).json()
    assert by_text["choices"][0]["stop_reason"] == "Paris"
    eos = post_json(base_url + "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 64,
        "temperature": 0}).json()
    assert eos["choices"][0]["finish_reason"] == "stop"
    assert eos["choices"][0]["stop_reason"] is None
    length = post_json(base_url + "/v1/completions", {"prompt": prompt, "max_tokens": 2}).json()
    assert length["choices"][0]["stop_reason"] is None


# ---- prompt logprobs --------------------------------------------------------------------------

def first_token_top(base_url, prompt_ids, n):
    """{token text: logprob} of the alternatives for the token after `prompt_ids`."""
    r = post_json(base_url + "/v1/completions", {"prompt": prompt_ids, "max_tokens": 1,
                                                 "temperature": 0, "logprobs": n})
    return r.json()["choices"][0]["logprobs"]["top_logprobs"][0]


def test_echo_with_logprobs_scores_the_prompt(base_url):
    prompt = "The quick brown fox jumps over the lazy dog because"
    ids = post_json(base_url + "/tokenize", {"prompt": prompt}).json()["tokens"]
    r = post_json(base_url + "/v1/completions", {"prompt": prompt, "max_tokens": 3,
                                                 "temperature": 0, "echo": True, "logprobs": 2})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    lp = choice["logprobs"]
    assert choice["text"].startswith(prompt)
    assert len(lp["tokens"]) == len(ids) + 3
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert all(x <= 0 for x in lp["token_logprobs"][1:])
    assert lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(lp["text_offset"])
    # Position t's distribution is the one a request for the first t + 1 tokens samples from.
    for t in (1, 4, len(ids) - 1):
        expected = first_token_top(base_url, ids[:t], 2)
        got = lp["top_logprobs"][t]
        for token, value in expected.items():
            assert token in got and got[token] == pytest.approx(value, abs=2e-3), (t, token)
    # Streamed: the first chunk carries the echoed prompt with its tokens' logprobs; the chunks
    # add up to the whole response.
    r = post_json(base_url + "/v1/completions", {"prompt": prompt, "max_tokens": 3,
                                                 "temperature": 0, "echo": True, "logprobs": 2,
                                                 "stream": True})
    assert r.status_code == 200, r.text
    chunks = [json.loads(e) for e in sse_events(r.text) if e != "[DONE]"]
    first = chunks[0]["choices"][0]
    assert first["text"].startswith(prompt)
    assert len(first["logprobs"]["tokens"]) >= len(ids)
    assert first["logprobs"]["token_logprobs"][0] is None
    streamed = {k: [] for k in ("tokens", "token_logprobs", "text_offset", "top_logprobs")}
    for ch in chunks:
        for k in streamed:
            streamed[k] += ch["choices"][0]["logprobs"][k]
    assert streamed["tokens"] == lp["tokens"]
    assert streamed["text_offset"] == lp["text_offset"]
    assert streamed["token_logprobs"][1:] == pytest.approx(lp["token_logprobs"][1:], abs=1e-4)
    assert "".join(ch["choices"][0]["text"] for ch in chunks) == choice["text"]


def test_vllm_prompt_logprobs_over_several_steps(base_url):
    # Longer than the 64 prompt rows a step computes: the prompt runs over several steps.
    prompt = " ".join(f"word{i}" for i in range(60))
    ids = post_json(base_url + "/tokenize", {"prompt": prompt}).json()["tokens"]
    assert len(ids) > 130
    body = post_json(base_url + "/v1/completions", {"prompt": prompt, "max_tokens": 1,
                                                    "temperature": 0, "prompt_logprobs": 1}).json()
    plp = body["choices"][0]["prompt_logprobs"]
    assert len(plp) == len(ids) and plp[0] is None
    for t in range(1, len(ids)):
        entry = plp[t]
        assert str(ids[t]) in entry, t
        assert 1 <= len(entry) <= 2
        own = entry[str(ids[t])]
        assert own["logprob"] <= 0 and own["rank"] >= 1 and isinstance(own["decoded_token"], str)
    t = 100
    expected = first_token_top(base_url, ids[:t], 1)
    best = min(entry["rank"] for entry in plp[t].values())
    assert best == 1
    chat = post_json(base_url + "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
        "prompt_logprobs": 0}).json()
    assert chat["prompt_logprobs"][0] is None and len(chat["prompt_logprobs"]) > 3
    assert all(len(e) == 1 for e in chat["prompt_logprobs"][1:])
    assert expected


def test_prompt_logprobs_in_the_first_chunk(base_url):
    prompt = "The quick brown fox jumps over the lazy dog"
    body = {"prompt": prompt, "max_tokens": 4, "temperature": 0, "prompt_logprobs": 2}
    whole = post_json(base_url + "/v1/completions", body).json()["choices"][0]
    r = post_json(base_url + "/v1/completions", {**body, "stream": True})
    assert r.status_code == 200, r.text
    chunks = [json.loads(e) for e in sse_events(r.text) if e != "[DONE]"]
    assert chunks[0]["choices"][0]["prompt_logprobs"] == whole["prompt_logprobs"]
    assert all("prompt_logprobs" not in ch["choices"][0] for ch in chunks[1:])
    assert "".join(ch["choices"][0]["text"] for ch in chunks) == whole["text"]
    # Chat: the response's prompt_logprobs come with the first chunk, the role's.
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "temperature": 0,
            "prompt_logprobs": 1}
    whole = post_json(base_url + "/v1/chat/completions", chat).json()
    r = post_json(base_url + "/v1/chat/completions", {**chat, "stream": True})
    chunks = [json.loads(e) for e in sse_events(r.text) if e != "[DONE]"]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[0]["prompt_logprobs"] == whole["prompt_logprobs"]
    assert all("prompt_logprobs" not in ch for ch in chunks[1:])
    assert "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks) == \
        whole["choices"][0]["message"]["content"]


def test_tgi_decoder_input_details(base_url):
    r = post_json(base_url + "/generate", {"inputs": "The capital of France is", "parameters": {
        "max_new_tokens": 2, "details": True, "decoder_input_details": True}})
    d = r.json()["details"]
    prefill = d["prefill"]
    ids = post_json(base_url + "/tokenize", {"prompt": "The capital of France is"}).json()["tokens"]
    assert [p["id"] for p in prefill] == ids
    assert prefill[0]["logprob"] is None
    assert all(p["logprob"] <= 0 for p in prefill[1:])
    # Streamed: the first event carries the prefill.
    r = post_json(base_url + "/generate_stream", {"inputs": "The capital of France is",
                                                  "parameters": {"max_new_tokens": 2,
                                                                 "decoder_input_details": True}})
    assert r.status_code == 200, r.text
    events = [json.loads(e) for e in sse_events(r.text)]
    assert [p["id"] for p in events[0]["prefill"]] == ids
    assert events[0]["prefill"][1:] == [
        {**p, "logprob": pytest.approx(p["logprob"], abs=1e-4)} for p in prefill[1:]]
    assert all("prefill" not in e for e in events[1:])
