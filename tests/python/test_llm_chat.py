"""LLM.chat against the server's /v1/chat/completions: the same prompt, text and tool calls."""

import json
import os
from pathlib import Path

import pytest

from inflight import SamplingParams
from package_env import LIMITS, MODEL, ROOT, Server, need_model

MESSAGES = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


def server_chat(server, messages, **extra):
    r = server.post("/v1/chat/completions", {"messages": messages, "temperature": 0,
                                             "max_tokens": 48, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def test_chat_equals_server(llm, server):
    expected = server_chat(server, MESSAGES)
    out = llm.chat(MESSAGES, SamplingParams(temperature=0, max_tokens=48), use_tqdm=False)[0]
    assert out.outputs[0].text == expected["choices"][0]["message"]["content"]
    assert out.outputs[0].finish_reason == expected["choices"][0]["finish_reason"]
    assert out.usage.prompt_tokens == expected["usage"]["prompt_tokens"]
    assert out.usage.completion_tokens == expected["usage"]["completion_tokens"]


# SmolLM2's own template never shows tools to the model (the server refuses tool_choice "auto"
# there): both sides use Qwen2.5's, which renders them and teaches hermes calls.
TOOLS_TEMPLATE = Path(os.environ.get("INFLIGHT_DATA_DIR", ROOT.parent / "shared" / "data")) / \
    "chat-templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"


@pytest.fixture(scope="module")
def tools_pair():
    if not TOOLS_TEMPLATE.exists():
        pytest.skip(f"skipped: {TOOLS_TEMPLATE} not found (set INFLIGHT_DATA_DIR)")
    need_model()
    from inflight import LLM
    server = Server(["--chat-template", str(TOOLS_TEMPLATE)])
    llm = LLM(str(MODEL), tool_call_parser="hermes", chat_template=str(TOOLS_TEMPLATE), **LIMITS)
    yield llm, server
    llm.shutdown()
    server.stop()


def test_chat_with_tools_equals_server(tools_pair):
    llm, server = tools_pair
    messages = [{"role": "user", "content": "What is the weather like in Paris today?"}]
    expected = server_chat(server, messages, tools=TOOLS)["choices"][0]["message"]
    out = llm.chat(messages, SamplingParams(temperature=0, max_tokens=48), use_tqdm=False,
                   tools=TOOLS)[0].outputs[0]
    calls = [{"name": c.name, "arguments": json.loads(c.arguments)} for c in
             out.tool_calls or []]
    want = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
            for c in expected.get("tool_calls") or []]
    assert calls == want
    assert (out.text or None) == (expected.get("content") or None)


def test_chat_batch_and_template(llm):
    tok = llm.get_tokenizer()
    text = tok.apply_chat_template(MESSAGES, tokenize=False)
    assert "What is the capital of France?" in text
    outs = llm.chat([MESSAGES, MESSAGES[1:]], SamplingParams(temperature=0, max_tokens=4),
                    use_tqdm=False)
    assert len(outs) == 2
    assert outs[0].prompt_token_ids == tok.apply_chat_template(MESSAGES)
