"""Two models served at once from a model repository (--model-repository, Triton's layout): the
default SmolLM2 model and the tiny golden Llama (random weights, whose greedy continuations
transformers recorded in tests/golden/fixtures/tiny-llama/golden.json), plus a broken model
that is never loaded at start. Each model is asked by name over OpenAI (the `openai` client),
TGI (huggingface_hub and the /models/{m} routes) and KServe (tritonclient http and grpc);
unloading one model while both stream leaves the other's streams whole and lets the unloaded
one's requests in flight finish; loading the broken model reports its error, keeps it in the
repository index and leaves the server serving. A load of a loaded model reloads it (its stream
on the old engine runs on), and a model directory added after start is listed and loads.

The tiny model's vocabulary is the first 151 ids of SmolLM2's: its prompts are token ids, or
text such as "a=b+c" whose tokens all lie below 151.
"""

import json
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import requests

from conftest import BIN, MODEL, TIMEOUT, ServerProcess, post_json, sse_events

TINY = Path(__file__).resolve().parents[1] / "golden" / "fixtures" / "tiny-llama"
GOLDEN = json.loads((TINY / "golden.json").read_text())
TINY_TEXT = "a=b+c"  # SmolLM2 tokens 81, 45, 82, 27, 83: inside the tiny vocabulary
PROMPT = "The capital of France is"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_repository(root):
    """smollm2 (a GGUF), tiny (a Hugging Face directory with an alias) and broken (truncated
    weights), each a directory of the repository at `root`."""
    (root / "smollm2").mkdir(parents=True)
    (root / "smollm2" / MODEL.name).symlink_to(MODEL)
    (root / "tiny").mkdir()
    for name in ("config.json", "model.safetensors"):
        (root / "tiny" / name).symlink_to(TINY / name)
    tiny_config = {"tokenizer": str(MODEL), "aliases": ["tiny-llama"], "max_model_len": 256,
                   "max_num_seqs": 8, "kv_cache_memory": "32MiB"}
    (root / "tiny" / "inflight.json").write_text(json.dumps(tiny_config))
    shutil.copytree(TINY, root / "broken")
    weights = root / "broken" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-64])
    (root / "broken" / "inflight.json").write_text(json.dumps({"tokenizer": str(MODEL)}))
    return root


@pytest.fixture(scope="module")
def repo_server(tmp_path_factory):
    if not MODEL.exists():
        pytest.skip(f"skipped: {MODEL} not found (run scripts/fetch_model.sh)")
    root = make_repository(tmp_path_factory.mktemp("repository"))
    s = ServerProcess(["--model-control-mode", "explicit", "--load-model", "smollm2",
                       "--load-model", "tiny", "--grpc-port", str(free_port())],
                      repository=root)
    s.wait_ready()
    m = re.search(r"grpc on [\d.]+:(\d+)", "".join(s.log))
    assert m, "".join(s.log)
    s.grpc_url = f"127.0.0.1:{m.group(1)}"
    s.root = root
    yield s
    assert s.stop() == 0, "".join(s.log[-50:])


@pytest.fixture(scope="module")
def oai(repo_server):
    from openai import OpenAI
    return OpenAI(base_url=repo_server.url + "/v1", api_key="unused", max_retries=0,
                  timeout=TIMEOUT)


def index(url):
    r = requests.post(url + "/v2/repository/index", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return {m["name"]: m for m in r.json()}


def wait_state(url, name, state):
    deadline = time.time() + TIMEOUT
    while index(url)[name]["state"] != state:
        assert time.time() < deadline, index(url)
        time.sleep(0.05)


def detokenize(url, model, ids):
    r = post_json(url + "/detokenize", {"model": model, "tokens": ids})
    assert r.status_code == 200, r.text
    return r.json()["prompt"]


def test_index_lists_every_model_with_its_state(repo_server):
    models = index(repo_server.url)
    assert [models[n]["state"] for n in ("broken", "smollm2", "tiny")] == [
        "UNAVAILABLE", "READY", "READY"]
    ready = post_json(repo_server.url + "/v2/repository/index", {"ready": True}).json()
    assert sorted(m["name"] for m in ready) == ["smollm2", "tiny"]


def test_openai_routes_pick_the_model_by_name(repo_server, oai):
    ids = [m.id for m in oai.models.list().data]
    assert ids == ["smollm2", "tiny", "tiny-llama"]
    assert oai.models.retrieve("tiny-llama").max_model_len == 256

    out = oai.completions.create(model="smollm2", prompt=PROMPT, max_tokens=6, temperature=0)
    assert "Paris" in out.choices[0].text and out.model == "smollm2"
    # The tiny model, by name and by alias, continues as transformers did (greedy, fp32).
    for case in GOLDEN["cases"][:2]:
        want = detokenize(repo_server.url, "tiny", case["greedy_ids"][:8])
        for name in ("tiny", "tiny-llama"):
            got = oai.completions.create(model=name, prompt=case["prompt_ids"], max_tokens=8,
                                         temperature=0,
                                         extra_body={"ignore_eos": True,
                                                     "skip_special_tokens": False})
            assert got.choices[0].text == want
            assert got.usage.completion_tokens == 8

    # A request that names no model, or an unknown one, is answered with the names to use.
    r = post_json(repo_server.url + "/v1/completions", {"prompt": "hi", "max_tokens": 1})
    assert r.status_code == 400 and "smollm2, tiny" in r.json()["error"]["message"], r.text
    r = post_json(repo_server.url + "/v1/completions", {"model": "nope", "prompt": "hi"})
    assert r.status_code == 404, r.text
    r = post_json(repo_server.url + "/v1/completions", {"model": "broken", "prompt": "hi"})
    assert r.status_code == 404 and "not loaded" in r.json()["error"]["message"], r.text


def test_tgi_routes_pick_the_model_by_path(repo_server):
    hub = pytest.importorskip("huggingface_hub")
    smol = hub.InferenceClient(base_url=repo_server.url + "/models/smollm2")
    assert "Paris" in smol.text_generation(PROMPT, max_new_tokens=6)
    tiny = post_json(repo_server.url + "/models/tiny/generate", {
        "inputs": TINY_TEXT, "parameters": {"max_new_tokens": 5, "details": True,
                                            "decoder_input_details": True}})
    assert tiny.status_code == 200, tiny.text
    details = tiny.json()["details"]
    assert [t["id"] for t in details["prefill"]] == [81, 45, 82, 27, 83]
    assert all(0 <= t["id"] < 151 for t in details["tokens"])
    stream = post_json(repo_server.url + "/models/tiny-llama/generate_stream", {
        "inputs": TINY_TEXT, "parameters": {"max_new_tokens": 4}})
    events = [json.loads(e) for e in sse_events(stream.text)]
    assert len(events) == 4 and events[-1]["details"]["generated_tokens"] == 4
    info = requests.get(repo_server.url + "/models/tiny/info", timeout=TIMEOUT).json()
    assert info["model_id"] == "tiny" and info["max_total_tokens"] == 256
    # The bare routes serve only a server of one model.
    r = post_json(repo_server.url + "/generate", {"inputs": PROMPT})
    assert r.status_code == 400 and "name one" in r.json()["error"]["message"], r.text


def test_kserve_http_infer_config_and_statistics(repo_server):
    httpclient = pytest.importorskip("tritonclient.http")
    c = httpclient.InferenceServerClient(repo_server.url.removeprefix("http://"))
    assert c.is_model_ready("smollm2") and c.is_model_ready("tiny")
    assert not c.is_model_ready("broken")

    def infer(model, text, max_tokens):
        inputs = [httpclient.InferInput("text_input", [1, 1], "BYTES"),
                  httpclient.InferInput("max_tokens", [1, 1], "INT32")]
        inputs[0].set_data_from_numpy(np.array([[text]], dtype=object))
        inputs[1].set_data_from_numpy(np.array([[max_tokens]], dtype=np.int32))
        return c.infer(model, inputs).as_numpy("text_output")[0][0].decode()

    before = c.get_inference_statistics("tiny")["model_stats"][0]
    assert "Paris" in infer("smollm2", PROMPT, 6)
    assert infer("tiny", TINY_TEXT, 4).startswith(TINY_TEXT)
    after = c.get_inference_statistics("tiny")["model_stats"][0]
    success = after["inference_stats"]["success"]
    assert success["count"] == before["inference_stats"]["success"]["count"] + 1
    assert int(success["ns"]) > int(before["inference_stats"]["success"]["ns"])
    assert after["execution_count"] > before["execution_count"]
    assert after["last_inference"] > 0
    everything = c.get_inference_statistics()["model_stats"]
    assert sorted(s["name"] for s in everything) == ["smollm2", "tiny"]

    config = c.get_model_config("tiny")
    assert config["name"] == "tiny" and config["max_batch_size"] == 8
    assert config["model_transaction_policy"]["decoupled"] is True
    assert config["parameters"]["max_model_len"]["string_value"] == "256"
    inputs = {t["name"]: t for t in config["input"]}
    assert inputs["text_input"]["data_type"] == "TYPE_STRING"
    assert inputs["max_tokens"]["data_type"] == "TYPE_INT32"

    index_entries = {m["name"]: m["state"] for m in c.get_model_repository_index()}
    assert index_entries == {"broken": "UNAVAILABLE", "smollm2": "READY", "tiny": "READY"}


def test_kserve_grpc_repository_config_and_statistics(repo_server):
    grpcclient = pytest.importorskip("tritonclient.grpc")
    c = grpcclient.InferenceServerClient(repo_server.grpc_url)
    try:
        index_entries = {m.name: m.state for m in c.get_model_repository_index().models}
        assert index_entries == {"broken": "UNAVAILABLE", "smollm2": "READY", "tiny": "READY"}
        config = c.get_model_config("tiny").config
        assert config.name == "tiny" and config.max_batch_size == 8
        assert config.model_transaction_policy.decoupled
        assert config.parameters["max_model_len"].string_value == "256"
        assert [i.name for i in config.input][:2] == ["text_input", "max_tokens"]

        inputs = [grpcclient.InferInput("text_input", [1, 1], "BYTES"),
                  grpcclient.InferInput("max_tokens", [1, 1], "INT32")]
        inputs[0].set_data_from_numpy(np.array([[TINY_TEXT]], dtype=object))
        inputs[1].set_data_from_numpy(np.array([[3]], dtype=np.int32))
        before = c.get_inference_statistics("tiny").model_stats[0].inference_stats.success.count
        result = c.infer("tiny", inputs)
        assert result.get_response().model_name == "tiny"
        stats = c.get_inference_statistics("tiny").model_stats[0]
        assert stats.inference_stats.success.count == before + 1
        assert stats.inference_stats.queue.count >= stats.inference_stats.success.count
        assert {s.name for s in c.get_inference_statistics().model_stats} == {"smollm2", "tiny"}
    finally:
        c.close()


def test_loading_a_broken_model_reports_its_error_and_serves_on(repo_server, oai):
    from tritonclient.utils import InferenceServerException
    r = post_json(repo_server.url + "/v2/repository/models/broken/load", {})
    assert r.status_code == 400 and "model.safetensors" in r.json()["error"], r.text
    entry = index(repo_server.url)["broken"]
    assert entry["state"] == "UNAVAILABLE" and "model.safetensors" in entry["reason"], entry
    # Over gRPC too, with the error as the status message.
    grpcclient = pytest.importorskip("tritonclient.grpc")
    c = grpcclient.InferenceServerClient(repo_server.grpc_url)
    try:
        with pytest.raises(InferenceServerException, match="model.safetensors"):
            c.load_model("broken")
        with pytest.raises(InferenceServerException, match="no model 'missing'"):
            c.load_model("missing")
    finally:
        c.close()
    r = post_json(repo_server.url + "/v2/repository/models/missing/load", {})
    assert r.status_code == 404, r.text
    out = oai.completions.create(model="smollm2", prompt=PROMPT, max_tokens=4, temperature=0)
    assert out.choices[0].finish_reason == "length"
    assert requests.get(repo_server.url + "/health", timeout=TIMEOUT).status_code == 200


def test_metrics_are_labelled_by_model(repo_server):
    text = requests.get(repo_server.url + "/metrics", timeout=TIMEOUT).text
    for model in ("smollm2", "tiny"):
        m = re.search(r'inflight_generation_tokens_total\{model_name="%s"\} (\S+)' % model, text)
        assert m and float(m.group(1)) > 0, text
    assert text.count("# TYPE inflight_generation_tokens_total counter") == 1


def stream_completion(url, model, prompt, max_tokens, started, results, key):
    """Streams a completion; sets `started` at its first chunk; results[key] = (chunks, finish
    reason, completion tokens)."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    chunks, finish, tokens = 0, None, None
    with requests.post(url + "/v1/completions", json=body, stream=True, timeout=TIMEOUT) as r:
        assert r.status_code == 200, r.text
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            event = json.loads(line[len(b"data: "):])
            if event["choices"]:
                chunks += 1
                started.set()
                finish = event["choices"][0]["finish_reason"] or finish
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
    results[key] = (chunks, finish, tokens)


def test_unloading_one_model_leaves_the_other_streaming(repo_server):
    url = repo_server.url
    results, threads, started = {}, [], []
    jobs = [("smollm2", PROMPT, 48, f"smollm2-{i}") for i in range(3)]
    jobs.append(("tiny", GOLDEN["cases"][1]["prompt_ids"], 200, "tiny"))
    for model, prompt, max_tokens, key in jobs:
        ev = threading.Event()
        t = threading.Thread(target=stream_completion,
                             args=(url, model, prompt, max_tokens, ev, results, key))
        t.start()
        threads.append(t)
        started.append(ev)
    for ev in started:
        assert ev.wait(TIMEOUT)
    r = post_json(url + "/v2/repository/models/tiny/unload", {})
    assert r.status_code == 200, r.text
    # From now on the tiny model takes no request; its stream in flight goes on.
    assert index(url)["tiny"]["state"] in ("UNLOADING", "UNAVAILABLE")
    r = post_json(url + "/v1/completions", {"model": "tiny", "prompt": [1], "max_tokens": 1})
    assert r.status_code == 404, r.text
    for t in threads:
        t.join(TIMEOUT)
    # Every stream ran to its length: SmolLM2's (on the CPU, seconds long) while the other
    # model unloaded, the tiny model's (if still running) drained before its engine stopped.
    for key, (chunks, finish, tokens) in results.items():
        assert (finish, tokens) == ("length", 200 if key == "tiny" else 48), (key, results[key])
    assert len(results) == 4
    wait_state(url, "tiny", "UNAVAILABLE")
    assert index(url)["tiny"]["reason"] == "unloaded"
    assert [m["id"] for m in requests.get(url + "/v1/models", timeout=TIMEOUT).json()["data"]] == [
        "smollm2"]

    # Loaded again, it serves as before.
    r = post_json(url + "/v2/repository/models/tiny/load", {})
    assert r.status_code == 200, r.text
    assert index(url)["tiny"]["state"] == "READY"
    case = GOLDEN["cases"][0]
    r = post_json(url + "/v1/completions", {"model": "tiny", "prompt": case["prompt_ids"],
                                            "max_tokens": 8, "temperature": 0,
                                            "ignore_eos": True, "skip_special_tokens": False})
    assert r.json()["choices"][0]["text"] == detokenize(url, "tiny", case["greedy_ids"][:8])


def test_kserve_http_unload_and_load(repo_server):
    httpclient = pytest.importorskip("tritonclient.http")
    c = httpclient.InferenceServerClient(repo_server.url.removeprefix("http://"))
    c.unload_model("tiny")
    wait_state(repo_server.url, "tiny", "UNAVAILABLE")
    assert not c.is_model_ready("tiny") and c.is_model_ready("smollm2")
    c.load_model("tiny")
    assert c.is_model_ready("tiny")


def test_kserve_grpc_unload_and_load(repo_server):
    grpcclient = pytest.importorskip("tritonclient.grpc")
    c = grpcclient.InferenceServerClient(repo_server.grpc_url)
    try:
        c.unload_model("tiny")
        deadline = time.time() + TIMEOUT
        while {m.name: m.state for m in c.get_model_repository_index().models}["tiny"] != \
                "UNAVAILABLE":
            assert time.time() < deadline
            time.sleep(0.05)
        assert not c.is_model_ready("tiny") and c.is_model_ready("smollm2")
        c.load_model("tiny")
        assert c.is_model_ready("tiny")
        assert {m.name: m.state for m in c.get_model_repository_index().models}["tiny"] == "READY"
    finally:
        c.close()


def test_a_load_reads_the_edited_config_and_checks_its_share(repo_server):
    url, config = repo_server.url, repo_server.root / "tiny" / "inflight.json"
    original = config.read_text()
    assert post_json(url + "/v2/repository/models/tiny/unload", {}).status_code == 200
    wait_state(url, "tiny", "UNAVAILABLE")
    try:
        # smollm2 keeps the share planned at start (half the 0.9 budget): 0.5 more cannot fit.
        config.write_text(json.dumps({**json.loads(original), "gpu_memory_utilization": 0.5}))
        r = post_json(url + "/v2/repository/models/tiny/load", {})
        assert r.status_code == 400 and "more than the budget 0.9" in r.json()["error"], r.text
        config.write_text(json.dumps({**json.loads(original), "max_num_seq": 4}))
        r = post_json(url + "/v2/repository/models/tiny/load", {})
        assert r.status_code == 400 and "unknown key 'max_num_seq'" in r.json()["error"], r.text
        assert "tiny/inflight.json" in index(url)["tiny"]["reason"]
    finally:
        config.write_text(original)
    assert post_json(url + "/v2/repository/models/tiny/load", {}).status_code == 200
    assert index(url)["tiny"] == {"name": "tiny", "version": "1", "state": "READY", "reason": ""}


def test_reloading_a_ready_model_swaps_engines_and_keeps_its_streams(repo_server):
    httpclient = pytest.importorskip("tritonclient.http")
    c = httpclient.InferenceServerClient(repo_server.url.removeprefix("http://"))
    url, config = repo_server.url, repo_server.root / "tiny" / "inflight.json"
    original = config.read_text()
    results, started = {}, threading.Event()
    t = threading.Thread(target=stream_completion, args=(
        url, "tiny", GOLDEN["cases"][1]["prompt_ids"], 200, started, results, "tiny"))
    t.start()
    try:
        assert started.wait(TIMEOUT)
        # A load of a loaded model whose files did not change changes nothing...
        loads = "".join(repo_server.log).count(f"loaded {repo_server.root / 'tiny'}")
        assert loads > 0, "".join(repo_server.log[-20:])
        c.load_model("tiny")
        assert "".join(repo_server.log).count(f"loaded {repo_server.root / 'tiny'}") == loads
        # ...after an edit it reloads the model from its files as they are now (Triton's).
        config.write_text(json.dumps({**json.loads(original), "max_num_seqs": 4}))
        c.load_model("tiny")
        assert c.get_model_config("tiny")["max_batch_size"] == 4
        assert index(url)["tiny"]["state"] == "READY"
        # A reload that fails leaves the loaded engine serving.
        config.write_text(json.dumps({**json.loads(original), "max_num_seq": 4}))
        r = post_json(url + "/v2/repository/models/tiny/load", {})
        assert r.status_code == 400, r.text
        assert "failed to reload 'tiny' (the loaded one serves on)" in r.json()["error"], r.text
        assert "unknown key 'max_num_seq'" in r.json()["error"], r.text
        assert c.is_model_ready("tiny")
    finally:
        config.write_text(original)
    t.join(TIMEOUT)
    assert results["tiny"][1:] == ("length", 200), results  # the stream on the old engine
    case = GOLDEN["cases"][0]
    r = post_json(url + "/v1/completions", {"model": "tiny-llama", "prompt": case["prompt_ids"],
                                            "max_tokens": 8, "temperature": 0,
                                            "ignore_eos": True, "skip_special_tokens": False})
    assert r.json()["choices"][0]["text"] == detokenize(url, "tiny", case["greedy_ids"][:8])
    c.load_model("tiny")  # back to the original settings
    assert c.get_model_config("tiny")["max_batch_size"] == 8


def test_a_model_directory_added_after_start_is_listed_and_loads(repo_server, oai):
    url, root = repo_server.url, repo_server.root
    new = root / "tiny-copy"
    new.mkdir()
    for name in ("config.json", "model.safetensors"):
        (new / name).symlink_to(TINY / name)
    (new / "inflight.json").write_text(json.dumps(
        {"tokenizer": str(MODEL), "max_model_len": 256, "kv_cache_memory": "32MiB",
         "device": "cpu"}))  # the GPU budget is shared out between the other two
    try:
        assert index(url)["tiny-copy"] == {"name": "tiny-copy", "version": "1",
                                           "state": "UNAVAILABLE", "reason": ""}
        r = post_json(url + "/v2/repository/models/tiny-copy/load", {})
        assert r.status_code == 200, r.text
        case = GOLDEN["cases"][0]
        out = oai.completions.create(model="tiny-copy", prompt=case["prompt_ids"], max_tokens=8,
                                     temperature=0, extra_body={"ignore_eos": True,
                                                                "skip_special_tokens": False})
        assert out.choices[0].text == detokenize(url, "tiny", case["greedy_ids"][:8])
        assert "tiny-copy" in [m.id for m in oai.models.list().data]
        assert post_json(url + "/v2/repository/models/tiny-copy/unload", {}).status_code == 200
        wait_state(url, "tiny-copy", "UNAVAILABLE")
    finally:
        shutil.rmtree(new)
    # Unloaded and gone from the directory: gone from the index.
    assert "tiny-copy" not in index(url)
    r = post_json(url + "/v2/repository/models/tiny-copy/load", {})
    assert r.status_code == 404, r.text


def serve_error(root, *args):
    if not BIN.exists() or not MODEL.exists():
        pytest.skip("skipped: inflight or the default model is missing")
    proc = subprocess.run([str(BIN), "serve", "--model-repository", str(root), "--host",
                           "127.0.0.1", "--port", "0", "--grpc-port", "0", *args],
                          capture_output=True, text=True, timeout=TIMEOUT)
    return proc.returncode, proc.stdout + proc.stderr


def test_mode_none_loads_every_model_and_refuses_model_control(tmp_path):
    if not MODEL.exists():
        pytest.skip(f"skipped: {MODEL} not found (run scripts/fetch_model.sh)")
    root = make_repository(tmp_path / "repo")
    shutil.rmtree(root / "broken")
    s = ServerProcess([], repository=root)
    try:
        s.wait_ready()
        assert {n: m["state"] for n, m in index(s.url).items()} == {"smollm2": "READY",
                                                                      "tiny": "READY"}
        for action in ("load", "unload"):
            r = post_json(s.url + f"/v2/repository/models/tiny/{action}", {})
            assert r.status_code == 400 and "--model-control-mode explicit" in r.json()["error"]
        assert index(s.url)["tiny"]["state"] == "READY"
    finally:
        assert s.stop() == 0, "".join(s.log[-50:])


def test_shares_over_the_budget_are_refused_at_start(tmp_path):
    root = make_repository(tmp_path / "repo")
    shutil.rmtree(root / "broken")
    (root / "smollm2" / "inflight.json").write_text(json.dumps({"gpu_memory_utilization": 0.6}))
    tiny = json.loads((root / "tiny" / "inflight.json").read_text())
    (root / "tiny" / "inflight.json").write_text(json.dumps({**tiny, "gpu_memory_utilization": 0.5}))
    rc, out = serve_error(root)
    assert rc != 0, out
    assert "smollm2 0.6" in out and "tiny 0.5" in out and "budget 0.9" in out, out
    rc, out = serve_error(root, "--gpu-memory-utilization", "0.95")
    assert rc != 0 and "budget 0.95" in out, out


def test_a_bad_config_key_is_refused_naming_file_and_key(tmp_path):
    root = make_repository(tmp_path / "repo")
    shutil.rmtree(root / "broken")
    (root / "smollm2" / "inflight.json").write_text(json.dumps({"max_num_seq": 8}))
    rc, out = serve_error(root)
    assert rc != 0, out
    assert "smollm2/inflight.json" in out and "unknown key 'max_num_seq'" in out, out
    # Mode none loads every model: naming some to load is refused.
    rc, out = serve_error(root, "--load-model", "tiny")
    assert rc != 0 and "--load-model needs --model-control-mode explicit" in out, out
