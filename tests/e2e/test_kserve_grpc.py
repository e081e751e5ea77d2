"""KServe v2 over gRPC with Triton's own client (tritonclient.grpc): health, metadata, ModelInfer,
decoupled streaming (start_stream / async_stream_infer) giving the OpenAI route's greedy text,
cancelling a stream freeing its KV blocks, and malformed tensors answered INVALID_ARGUMENT while
the server stays up."""

import queue
import re
import socket
import time

import numpy as np
import pytest

from conftest import SERVED_NAME, TIMEOUT, ServerProcess, post_json

grpcclient = pytest.importorskip("tritonclient.grpc")
import grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

PROMPT = "The capital of France is"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def kserve_server():
    s = ServerProcess(["--grpc-port", str(free_port())])
    s.wait_ready()
    m = re.search(r"grpc on [\d.]+:(\d+)", "".join(s.log))
    assert m, "".join(s.log)
    s.grpc_url = f"127.0.0.1:{m.group(1)}"
    yield s
    assert s.stop() == 0, "".join(s.log[-50:])


@pytest.fixture(scope="module")
def triton(kserve_server):
    c = grpcclient.InferenceServerClient(kserve_server.grpc_url)
    yield c
    c.close()


def tensor(name, value, datatype):
    t = grpcclient.InferInput(name, list(value.shape), datatype)
    t.set_data_from_numpy(value)
    return t


def prompt_inputs(max_tokens, stream=None, text=PROMPT, **extra):
    inputs = [tensor("text_input", np.array([[text]], dtype=object), "BYTES"),
              tensor("max_tokens", np.array([[max_tokens]], dtype=np.int32), "INT32")]
    if stream is not None:
        inputs.append(tensor("stream", np.array([[stream]]), "BOOL"))
    for name, (value, datatype) in extra.items():
        inputs.append(tensor(name, value, datatype))
    return inputs


def openai_text(server, max_tokens, prompt=PROMPT):
    r = post_json(server.url + "/v1/completions", {"prompt": prompt, "max_tokens": max_tokens,
                                                   "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def is_final(result):
    return result.get_response().parameters["triton_final_response"].bool_param


def text_of(result):
    return result.as_numpy("text_output")[0][0].decode()


def test_health_and_metadata(triton, kserve_server):
    assert triton.is_server_live()
    assert triton.is_server_ready()
    assert triton.is_model_ready(SERVED_NAME)
    assert triton.is_model_ready(SERVED_NAME, "1")
    assert not triton.is_model_ready(SERVED_NAME, "2")
    assert not triton.is_model_ready("nope")
    meta = triton.get_server_metadata(as_json=True)
    assert meta["name"] == "inflight"
    model = triton.get_model_metadata(SERVED_NAME, as_json=True)
    assert model["versions"] == ["1"]
    inputs = {t["name"]: t for t in model["inputs"]}
    assert inputs["text_input"]["datatype"] == "BYTES"
    assert inputs["stream"]["datatype"] == "BOOL"
    assert model["outputs"][0]["name"] == "text_output"
    with pytest.raises(InferenceServerException) as e:
        triton.get_model_metadata("nope")
    assert e.value.status() == "StatusCode.NOT_FOUND"


def test_infer_matches_completions(triton, kserve_server):
    expected = openai_text(kserve_server, 12)
    r = triton.infer(SERVED_NAME, prompt_inputs(12), request_id="abc")
    assert r.get_response().id == "abc"
    assert text_of(r) == PROMPT + expected
    assert is_final(r)
    r = triton.infer(SERVED_NAME, prompt_inputs(
        12, exclude_input_in_output=(np.array([[True]]), "BOOL")))
    assert text_of(r) == expected


def collect(q, n_requests, timeout=TIMEOUT):
    """Responses per request id until each sent its final one: {id: [text, ...]}."""
    texts, done = {}, set()
    while len(done) < n_requests:
        result, error = q.get(timeout=timeout)
        assert error is None, error
        rid = result.get_response().id
        texts.setdefault(rid, []).append(text_of(result))
        if is_final(result):
            done.add(rid)
    return texts


def test_stream_gives_the_openai_text(triton, kserve_server):
    expected = openai_text(kserve_server, 16)
    q = queue.Queue()
    triton.start_stream(callback=lambda result, error: q.put((result, error)))
    try:
        triton.async_stream_infer(SERVED_NAME, prompt_inputs(16, True), request_id="s1")
        # Two more on the same stream: a non-streaming one answers once, in full.
        triton.async_stream_infer(SERVED_NAME, prompt_inputs(16, True), request_id="s2")
        triton.async_stream_infer(SERVED_NAME, prompt_inputs(16, False), request_id="s3")
        texts = collect(q, 3)
    finally:
        triton.stop_stream()
    assert len(texts["s1"]) > 1
    assert "".join(texts["s1"]) == expected
    assert "".join(texts["s2"]) == expected
    assert texts["s3"] == [PROMPT + expected]


def test_stream_errors_keep_the_stream(triton):
    q = queue.Queue()
    triton.start_stream(callback=lambda result, error: q.put((result, error)))
    try:
        bad = prompt_inputs(4, True)[:1]  # no max_tokens
        triton.async_stream_infer(SERVED_NAME, bad, request_id="bad")
        result, error = q.get(timeout=TIMEOUT)
        assert result is None and "max_tokens" in str(error)
        triton.async_stream_infer(SERVED_NAME, prompt_inputs(4, True), request_id="good")
        texts = collect(q, 1)
        assert "".join(texts["good"])
    finally:
        triton.stop_stream()


def test_cancelling_a_stream_frees_its_kv_blocks(triton, kserve_server):
    q = queue.Queue()
    triton.start_stream(callback=lambda result, error: q.put((result, error)))
    # A long generation: the end token is one the model will not produce.
    inputs = prompt_inputs(400, True, end_id=(np.array([[49151]], dtype=np.int32), "INT32"),
                           temperature=(np.array([[0.8]], dtype=np.float32), "FP32"))
    triton.async_stream_infer(SERVED_NAME, inputs, request_id="long")
    result, error = q.get(timeout=TIMEOUT)
    assert error is None and not is_final(result)
    m = kserve_server.metrics()
    assert m["inflight_kv_cache_used_blocks"] > 0
    triton.stop_stream(cancel_requests=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        m = kserve_server.metrics()
        if m["inflight_kv_cache_used_blocks"] == 0 and m["inflight_num_requests_running"] == 0:
            break
        time.sleep(0.05)
    assert m["inflight_kv_cache_used_blocks"] == 0
    assert m["inflight_num_requests_running"] == 0
    assert triton.is_server_ready()


@pytest.mark.parametrize("extra,message", [
    ({"temperature": (np.array([[0.5]], dtype=np.float64), "FP64")}, "unexpected datatype FP64"),
    ({"top_k": (np.array([[1, 2]], dtype=np.int32), "INT32")}, "expects one element"),
    ({"beam_width": (np.array([[4]], dtype=np.int32), "INT32")}, "only 1"),
    ({"what": (np.array([[4]], dtype=np.int32), "INT32")}, "unexpected inference input"),
])
def test_malformed_tensors_are_invalid_argument(triton, extra, message):
    with pytest.raises(InferenceServerException) as e:
        triton.infer(SERVED_NAME, prompt_inputs(4, **extra))
    assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert message in e.value.message()
    assert triton.is_server_live()


def test_missing_input_wrong_shape_unknown_model(triton):
    with pytest.raises(InferenceServerException) as e:
        triton.infer(SERVED_NAME, prompt_inputs(4)[:1])
    assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "'max_tokens' is missing" in e.value.message()
    batch2 = [tensor("text_input", np.array([[PROMPT], [PROMPT]], dtype=object), "BYTES"),
              prompt_inputs(4)[1]]
    with pytest.raises(InferenceServerException) as e:
        triton.infer(SERVED_NAME, batch2)
    assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
    with pytest.raises(InferenceServerException) as e:
        triton.infer("nope", prompt_inputs(4))
    assert e.value.status() == "StatusCode.NOT_FOUND"
    with pytest.raises(InferenceServerException) as e:
        triton.infer(SERVED_NAME, prompt_inputs(4, True))  # decoupled needs ModelStreamInfer
    assert e.value.status() == "StatusCode.INVALID_ARGUMENT"


def test_raw_contents_that_disagree_with_the_shape(kserve_server):
    """A hand-built request whose raw bytes do not fill the shape: INVALID_ARGUMENT."""
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    channel = grpc.insecure_channel(kserve_server.grpc_url)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    req = service_pb2.ModelInferRequest(model_name=SERVED_NAME)
    t = req.inputs.add(name="max_tokens", datatype="INT32", shape=[1, 1])
    req.raw_input_contents.append(b"\x01\x00")
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(req)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    del t
    channel.close()


def test_api_key_is_required_when_set():
    port = free_port()
    s = ServerProcess(["--grpc-port", str(port), "--api-key", "sekret"])
    try:
        s.wait_ready()
        c = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
        with pytest.raises(InferenceServerException) as e:
            c.infer(SERVED_NAME, prompt_inputs(2))
        assert e.value.status() == "StatusCode.UNAUTHENTICATED"
        r = c.infer(SERVED_NAME, prompt_inputs(2), headers={"authorization": "Bearer sekret"})
        assert text_of(r).startswith(PROMPT)
        c.close()
    finally:
        assert s.stop() == 0


def test_port_in_use_fails_clearly():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(RuntimeError, match="gRPC: cannot listen"):
            s = ServerProcess(["--grpc-port", str(port)])
            s.wait_ready(timeout=30)


def test_sigterm_ends_open_streams_at_the_deadline_and_exits_0():
    port = free_port()
    s = ServerProcess(["--grpc-port", str(port), "--shutdown-timeout", "1"])
    s.wait_ready()
    c = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
    q = queue.Queue()
    c.start_stream(callback=lambda result, error: q.put((result, error)))
    c.async_stream_infer(SERVED_NAME, prompt_inputs(
        400, True, end_id=(np.array([[49151]], dtype=np.int32), "INT32")), request_id="long")
    result, error = q.get(timeout=TIMEOUT)
    assert error is None and not is_final(result)
    stopped_at = time.time()
    assert s.stop() == 0, "".join(s.log[-30:])
    assert time.time() - stopped_at < 15
    # The stream ended with an error rather than hanging: cancelled at the shutdown deadline.
    while error is None:
        result, error = q.get(timeout=TIMEOUT)
    c.stop_stream()
    c.close()


def test_limits_are_resource_exhausted():
    port = free_port()
    s = ServerProcess(["--grpc-port", str(port), "--max-concurrent-requests", "1",
                       "--max-body-bytes", "4096"])
    try:
        s.wait_ready()
        c = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
        q = queue.Queue()
        c.start_stream(callback=lambda result, error: q.put((result, error)))
        c.async_stream_infer(SERVED_NAME, prompt_inputs(
            400, True, end_id=(np.array([[49151]], dtype=np.int32), "INT32")), request_id="long")
        result, error = q.get(timeout=TIMEOUT)
        assert error is None
        # The one generation slot is taken.
        with pytest.raises(InferenceServerException) as e:
            c.infer(SERVED_NAME, prompt_inputs(2))
        assert e.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
        c.stop_stream(cancel_requests=True)
        # A message over --max-body-bytes.
        with pytest.raises(InferenceServerException) as e:
            c.infer(SERVED_NAME, prompt_inputs(2, text="x" * 10000))
        assert e.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
        assert c.is_server_live()
        c.close()
    finally:
        assert s.stop() == 0
