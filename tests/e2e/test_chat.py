"""POST /v1/chat/completions through the official `openai` client."""

import pytest

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


def test_chat_non_stream(client, model_name):
    r = client.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=6,
                                       temperature=0)
    assert r.object == "chat.completion"
    assert r.id.startswith("chatcmpl-")
    assert r.model == model_name
    assert r.system_fingerprint
    c = r.choices[0]
    assert c.message.role == "assistant"
    assert c.message.content
    assert c.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 10  # the template wraps the message
    assert r.usage.completion_tokens <= 6
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_stream_with_usage(client, model_name):
    whole = client.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=6,
                                           temperature=0)
    stream = client.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=6,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices]
    assert text == whole.choices[0].message.content
    assert finishes[-1] == whole.choices[0].finish_reason
    assert all(f is None for f in finishes[:-1])
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert all(ch.usage is None for ch in chunks[:-1])


def test_chat_n2_and_max_completion_tokens(client, model_name):
    r = client.chat.completions.create(model=model_name, messages=MESSAGES, n=2,
                                       max_completion_tokens=3, temperature=1.0, seed=11)
    assert sorted(c.index for c in r.choices) == [0, 1]
    assert r.usage.completion_tokens <= 6


def test_chat_logprobs(client, model_name):
    r = client.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=4,
                                       temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    assert "".join(t.token for t in content) == r.choices[0].message.content
    for t in content:
        assert t.logprob <= 0
        assert bytes(t.bytes).decode("utf-8", "replace") == t.token
        assert len(t.top_logprobs) == 3
        assert t.top_logprobs[0].token == t.token  # greedy
        assert t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob


def test_chat_stream_logprobs(client, model_name):
    stream = client.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=3,
                                            temperature=0, logprobs=True, top_logprobs=1,
                                            stream=True)
    tokens = []
    for ch in stream:
        if ch.choices and ch.choices[0].logprobs:
            tokens += ch.choices[0].logprobs.content
    assert len(tokens) == 3


def test_chat_stop(client, model_name):
    base = client.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=8,
                                          temperature=0)
    words = base.choices[0].message.content.split()
    assert len(words) >= 2
    r = client.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=8,
                                       temperature=0, stop=[" " + words[1]])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == base.choices[0].message.content.split(
        " " + words[1])[0]


def test_chat_system_and_multi_turn(client, model_name):
    messages = [
        {"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": [{"type": "text", "text": "Name a color."}]},
    ]
    r = client.chat.completions.create(model=model_name, messages=messages, max_tokens=4,
                                       temperature=0)
    assert r.choices[0].message.content
