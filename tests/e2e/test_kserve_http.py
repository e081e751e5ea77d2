"""KServe v2 over HTTP with Triton's own client (tritonclient.http): health, metadata, infer with
the TensorRT-LLM ensemble's tensors (JSON and binary), the generate extension, and malformed
tensors answered 400 in Triton's error shape."""

import json

import numpy as np
import pytest
import requests

from conftest import post_json, sse_events

httpclient = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

PROMPT = "The capital of France is"


def openai_text(base_url, model_name, max_tokens):
    r = post_json(base_url + "/v1/completions", {"model": model_name, "prompt": PROMPT,
                                                 "max_tokens": max_tokens, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def tensor(name, value, datatype, binary=True):
    t = httpclient.InferInput(name, list(value.shape), datatype)
    t.set_data_from_numpy(value, binary_data=binary)
    return t


def prompt_inputs(max_tokens, binary=True, text=PROMPT):
    return [tensor("text_input", np.array([[text]], dtype=object), "BYTES", binary),
            tensor("max_tokens", np.array([[max_tokens]], dtype=np.int32), "INT32", binary)]


@pytest.fixture(scope="module")
def triton(server):
    return httpclient.InferenceServerClient(server.url.removeprefix("http://"))


def test_health_and_metadata(triton, model_name):
    assert triton.is_server_live()
    assert triton.is_server_ready()
    assert triton.is_model_ready(model_name)
    assert triton.is_model_ready(model_name, "1")
    assert not triton.is_model_ready("no-such-model")
    meta = triton.get_server_metadata()
    assert meta["name"] == "inflight" and "generate" in meta["extensions"]
    model = triton.get_model_metadata(model_name)
    assert model["versions"] == ["1"]
    inputs = {t["name"]: t for t in model["inputs"]}
    assert inputs["text_input"]["datatype"] == "BYTES"
    assert inputs["max_tokens"]["datatype"] == "INT32"
    assert inputs["random_seed"]["datatype"] == "UINT64"
    assert [t["name"] for t in model["outputs"]][0] == "text_output"
    with pytest.raises(InferenceServerException, match="unknown model"):
        triton.get_model_metadata("no-such-model")


@pytest.mark.parametrize("binary", [True, False])
def test_infer_matches_completions(triton, base_url, model_name, binary):
    expected = openai_text(base_url, model_name, 12)
    r = triton.infer(model_name, prompt_inputs(12, binary), request_id="req-1")
    assert r.get_response()["id"] == "req-1"
    out = r.as_numpy("text_output")
    assert out.shape == (1, 1)
    # Triton's TensorRT-LLM ensemble returns the prompt first unless told otherwise.
    assert out[0][0].decode() == PROMPT + expected
    inputs = prompt_inputs(12, binary) + [
        tensor("exclude_input_in_output", np.array([[True]]), "BOOL", binary)]
    r = triton.infer(model_name, inputs, model_version="1")
    assert r.as_numpy("text_output")[0][0].decode() == expected


def test_infer_stop_words_and_log_probs(triton, model_name):
    inputs = prompt_inputs(12) + [
        tensor("exclude_input_in_output", np.array([[True]]), "BOOL"),
        tensor("stop_words", np.array([["."]], dtype=object), "BYTES"),
        tensor("return_log_probs", np.array([[True]]), "BOOL")]
    r = triton.infer(model_name, inputs)
    text = r.as_numpy("text_output")[0][0].decode()
    assert "." not in text
    log_probs = r.as_numpy("output_log_probs")
    assert log_probs.shape[0] == 1 and log_probs.shape[1] >= 1
    assert np.all(log_probs <= 0)
    assert r.as_numpy("cum_log_probs")[0][0] == pytest.approx(log_probs.sum(), rel=1e-4)


def test_generate_and_generate_stream(base_url, model_name):
    expected = openai_text(base_url, model_name, 12)
    url = f"{base_url}/v2/models/{model_name}"
    r = requests.post(url + "/generate", json={"text_input": PROMPT, "max_tokens": 12})
    assert r.status_code == 200, r.text
    assert r.json() == {"model_name": model_name, "model_version": "1",
                        "text_output": PROMPT + expected}
    r = requests.post(url + "/generate_stream",
                      json={"text_input": PROMPT, "parameters": {"max_tokens": 12}})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    chunks = [json.loads(e)["text_output"] for e in sse_events(r.text)]
    assert len(chunks) > 1
    assert "".join(chunks) == expected


@pytest.mark.parametrize("inputs,message", [
    ([("text_input", [[PROMPT]], "BYTES"), ("max_tokens", [[4.0]], "FP32")],
     "unexpected datatype FP32"),
    ([("text_input", [[PROMPT]], "BYTES"), ("max_tokens", [[4, 4]], "INT32")],
     "expects one element"),
    ([("text_input", [[PROMPT], [PROMPT]], "BYTES"), ("max_tokens", [[4]], "INT32")],
     "batch size 1"),
    ([("text_input", [[PROMPT]], "BYTES")], "expected input 'max_tokens' is missing"),
    ([("text_input", [[PROMPT]], "BYTES"), ("max_tokens", [[4]], "INT32"),
      ("beam_width", [[2]], "INT32")], "only 1"),
    ([("text_input", [[PROMPT]], "BYTES"), ("max_tokens", [[4]], "INT32"),
      ("no_such_input", [[1]], "INT32")], "unexpected inference input"),
])
def test_malformed_tensors_are_400(base_url, model_name, inputs, message):
    body = {"inputs": [{"name": n, "shape": list(np.array(d).shape), "datatype": dt, "data": d}
                       for n, d, dt in inputs]}
    r = requests.post(f"{base_url}/v2/models/{model_name}/infer", json=body)
    assert r.status_code == 400, r.text
    assert set(r.json()) == {"error"} and message in r.json()["error"]
    assert requests.get(base_url + "/v2/health/ready").status_code == 200


def test_shape_and_data_disagree_and_bad_json(base_url, model_name):
    url = f"{base_url}/v2/models/{model_name}/infer"
    body = {"inputs": [{"name": "text_input", "shape": [1, 2], "datatype": "BYTES",
                        "data": [PROMPT]}]}
    r = requests.post(url, json=body)
    assert r.status_code == 400 and "1 elements for shape [1,2]" in r.json()["error"]
    r = requests.post(url, data=b"{not json")
    assert r.status_code == 400 and "error" in r.json()
    # Binary data shorter than its declared size.
    r = requests.post(url, data=b'{"inputs":[{"name":"max_tokens","shape":[1],"datatype":"INT32",'
                      b'"parameters":{"binary_data_size":4}}]}\x01\x00',
                      headers={"Inference-Header-Content-Length": "90"})
    assert r.status_code == 400


def test_unknown_model_version_and_route(base_url, model_name, triton):
    body = {"text_input": PROMPT, "max_tokens": 2}
    assert requests.post(f"{base_url}/v2/models/nope/generate", json=body).status_code == 404
    r = requests.post(f"{base_url}/v2/models/{model_name}/versions/2/generate", json=body)
    assert r.status_code == 404 and "version" in r.json()["error"]
    assert requests.get(f"{base_url}/v2/models/{model_name}/versions/1/ready").status_code == 200
    assert requests.get(f"{base_url}/v2/models/{model_name}/infer").status_code == 405
    assert requests.get(f"{base_url}/v2/models/{model_name}/bogus").status_code == 404
    # HTTP/JSON infer cannot stream: Triton's decoupled models need gRPC or generate_stream.
    inputs = prompt_inputs(2) + [tensor("stream", np.array([[True]]), "BOOL")]
    with pytest.raises(InferenceServerException, match="stream"):
        triton.infer(model_name, inputs)


def test_content_types(base_url, model_name):
    """JSON (or none) and binary bodies are served; the types a browser may post across origins
    without a preflight are not (415), as on every other route."""
    url = f"{base_url}/v2/models/{model_name}/generate"
    body = json.dumps({"text_input": PROMPT, "max_tokens": 2})
    for content_type, status in [(None, 200), ("application/json", 200),
                                 ("application/octet-stream", 200), ("text/plain", 415),
                                 ("application/x-www-form-urlencoded", 415)]:
        headers = {"Content-Type": content_type} if content_type else {}
        r = requests.post(url, data=body, headers=headers)
        assert r.status_code == status, (content_type, r.text)
