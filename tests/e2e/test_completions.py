"""POST /v1/completions through the official `openai` client."""

import pytest

from conftest import post_json

PROMPT = "The capital of France is"


def test_completion_greedy_with_usage(client, model_name):
    r = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=6, temperature=0)
    assert r.object == "text_completion"
    assert r.id.startswith("cmpl-")
    assert r.model == model_name
    assert r.created > 1_600_000_000
    assert r.system_fingerprint
    assert len(r.choices) == 1
    c = r.choices[0]
    assert c.index == 0
    assert c.text
    assert c.finish_reason in ("length", "stop")
    assert r.usage.prompt_tokens > 0
    assert 0 < r.usage.completion_tokens <= 6
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.usage.prompt_tokens_details.cached_tokens >= 0
    # Greedy decoding is deterministic.
    again = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=6,
                                      temperature=0)
    assert again.choices[0].text == c.text


def test_max_tokens_gives_length(client, model_name):
    r = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=3, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 3


def test_stream_matches_non_stream(client, model_name):
    whole = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=6,
                                      temperature=0)
    stream = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=6,
                                       temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    text, finish, usage, ids = "", None, None, set()
    for chunk in stream:
        ids.add(chunk.id)
        assert chunk.object == "text_completion"
        if chunk.choices:
            text += chunk.choices[0].text
            finish = chunk.choices[0].finish_reason or finish
        else:
            usage = chunk.usage
    assert len(ids) == 1
    assert text == whole.choices[0].text
    assert finish == whole.choices[0].finish_reason
    assert usage is not None
    assert usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_n2_with_seed(client, model_name):
    r = client.completions.create(model=model_name, prompt="Once upon a time", max_tokens=5,
                                  n=2, temperature=1.0, seed=1234)
    assert sorted(c.index for c in r.choices) == [0, 1]
    assert 2 <= r.usage.completion_tokens <= 10
    again = client.completions.create(model=model_name, prompt="Once upon a time", max_tokens=5,
                                      n=2, temperature=1.0, seed=1234)
    assert [c.text for c in again.choices] == [c.text for c in r.choices]


def test_n2_stream_has_both_choices(client, model_name):
    stream = client.completions.create(model=model_name, prompt="Once upon a time",
                                       max_tokens=4, n=2, temperature=0.8, seed=7, stream=True)
    texts, finished = {0: "", 1: ""}, set()
    for chunk in stream:
        for c in chunk.choices:
            texts[c.index] += c.text
            if c.finish_reason:
                finished.add(c.index)
    assert finished == {0, 1}
    assert texts[0] and texts[1]


def test_logprobs(client, model_name):
    r = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=4, temperature=0,
                                  logprobs=2)
    lp = r.choices[0].logprobs
    n = r.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == n
    assert "".join(lp.tokens) == r.choices[0].text
    assert lp.text_offset[0] == 0
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert logprob <= 0
        assert 1 <= len(top) <= 3
        # Greedy: the chosen token is the most likely one.
        assert token in top and abs(max(top.values()) - logprob) < 1e-4


def test_stop_string(client, model_name):
    base = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=8, temperature=0)
    text = base.choices[0].text
    stop = text.strip().split()[0] if text.strip() else None
    if not stop:
        pytest.skip("model produced only whitespace")
    r = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=8, temperature=0,
                                  stop=[stop])
    assert r.choices[0].finish_reason == "stop"
    assert stop not in r.choices[0].text
    assert text.startswith(r.choices[0].text)


def test_prompt_forms(client, model_name, base_url):
    tokens = post_json(base_url + "/tokenize", {"prompt": PROMPT}).json()["tokens"]
    by_text = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=4,
                                        temperature=0)
    by_ids = client.completions.create(model=model_name, prompt=tokens, max_tokens=4,
                                       temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text
    assert by_ids.usage.prompt_tokens == len(tokens)
    many = client.completions.create(model=model_name, prompt=[PROMPT, "Hello"], max_tokens=3,
                                     temperature=0)
    assert [c.index for c in many.choices] == [0, 1]
    assert many.choices[0].text == by_text.choices[0].text[:len(many.choices[0].text)]
    lists = client.completions.create(model=model_name, prompt=[tokens, tokens], max_tokens=3,
                                      temperature=0, n=2)
    assert [c.index for c in lists.choices] == [0, 1, 2, 3]


def test_echo(client, model_name):
    r = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=3, temperature=0,
                                  echo=True)
    assert r.choices[0].text.startswith(PROMPT)
    assert len(r.choices[0].text) > len(PROMPT)


def test_extras_and_penalties(client, model_name):
    r = client.completions.create(
        model=model_name, prompt=PROMPT, max_tokens=4, temperature=0.7, top_p=0.9, seed=3,
        presence_penalty=0.5, frequency_penalty=0.5, user="e2e",
        extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "min_tokens": 2,
                    "ignore_eos": True})
    assert r.usage.completion_tokens == 4


def test_prefix_cache_reports_cached_tokens(client, model_name):
    prompt = "In a quiet village by the sea there lived an old fisherman who " * 4
    client.completions.create(model=model_name, prompt=prompt, max_tokens=1, temperature=0)
    r = client.completions.create(model=model_name, prompt=prompt, max_tokens=1, temperature=0)
    assert r.usage.prompt_tokens_details.cached_tokens > 0


def test_logit_bias_steers_and_bans_tokens(client, base_url, model_name):
    # +100 on one token makes greedy decoding repeat it; -100 on the unbiased greedy choice bans it.
    word = post_json(base_url + "/tokenize", {"prompt": " banana", "add_special_tokens": False})
    forced = word.json()["tokens"][0]
    r = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=4, temperature=0,
                                  logit_bias={str(forced): 100}, extra_body={"ignore_eos": True})
    text = post_json(base_url + "/detokenize", {"tokens": [forced] * 4}).json()["prompt"]
    assert r.choices[0].text == text
    plain = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=1,
                                      temperature=0, logprobs=1)
    first = post_json(base_url + "/tokenize", {"prompt": PROMPT + plain.choices[0].text,
                                               "add_special_tokens": False}).json()["tokens"][-1]
    banned = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=1,
                                       temperature=0, logit_bias={str(first): -100})
    assert banned.choices[0].text != plain.choices[0].text
    bad = post_json(base_url + "/v1/completions",
                    {"model": model_name, "prompt": PROMPT, "logit_bias": {"x": 1}})
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "logit_bias"
