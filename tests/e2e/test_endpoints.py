"""GET /v1/models, /health, /version, /info; POST /tokenize and /detokenize (vLLM's shapes)."""

import requests

from conftest import MAX_MODEL_LEN, post_json


def test_models(client, model_name):
    models = client.models.list()
    assert [m.id for m in models.data] == [model_name]
    m = models.data[0]
    assert m.object == "model"
    assert m.owned_by
    raw = requests.get(client.base_url.__str__().rstrip("/") + "/models").json()
    assert raw["object"] == "list"
    assert raw["data"][0]["max_model_len"] == MAX_MODEL_LEN
    assert client.models.retrieve(model_name).id == model_name


def test_health_and_version(base_url):
    assert requests.get(base_url + "/health").status_code == 200
    assert requests.get(base_url + "/version").json()["version"]
    info = requests.get(base_url + "/info").json()
    assert info["max_total_tokens"] == MAX_MODEL_LEN


def test_tokenize_detokenize_roundtrip(base_url, model_name):
    r = post_json(base_url + "/tokenize", {"model": model_name, "prompt": "Hello world",
                                           "return_token_strs": True}).json()
    assert r["count"] == len(r["tokens"]) > 0
    assert r["max_model_len"] == MAX_MODEL_LEN
    assert "".join(r["token_strs"]).replace("\u0120", " ").endswith("world")
    back = post_json(base_url + "/detokenize", {"model": model_name, "tokens": r["tokens"]})
    assert back.json() == {"prompt": "Hello world"}


def test_tokenize_chat_messages(base_url, client, model_name):
    messages = [{"role": "user", "content": "Hi there"}]
    r = post_json(base_url + "/tokenize", {"messages": messages}).json()
    chat = client.chat.completions.create(model=model_name, messages=messages, max_tokens=1)
    assert r["count"] == chat.usage.prompt_tokens
    text = post_json(base_url + "/detokenize", {"tokens": r["tokens"]}).json()["prompt"]
    assert "Hi there" in text
    bare = post_json(base_url + "/tokenize", {"messages": messages,
                                              "add_generation_prompt": False}).json()
    assert bare["count"] < r["count"]
