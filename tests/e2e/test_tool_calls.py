"""Tool calls with tool_choice "auto", as OpenAI clients receive them: parsed out of the reply in
the chat template's format (hermes, qwen3_coder, mistral, pythonic, glm45, seed_oss, kimi_k2),
streamed as deltas (a first delta with id, type, name and empty
arguments, then argument fragments as tokens arrive, an index per call) that the `openai`
client reassembles, and a clear 400 when the template cannot show the model its tools.

The small test model does not call tools of its own accord, so a regex (vLLM's guided_regex)
makes it write calls in each format: the server's parsing is what is under test."""

import json
import os
from pathlib import Path

import pytest

from conftest import ServerProcess, post_json

DATA = Path(os.environ.get("INFLIGHT_DATA_DIR",
                           Path(__file__).resolve().parents[3] / "shared" / "data"))
TEMPLATES = DATA / "chat-templates"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city for some days",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time now",
    "parameters": {"type": "object", "properties": {}}}}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris and the time?"}]

HERMES_TWO_CALLS = (r'Let me check\. <tool_call>\n\{"name": "get_weather", "arguments": '
                    r'\{"city": "Paris", "days": [1-3]\}\}\n</tool_call>\n<tool_call>\n'
                    r'\{"name": "get_time", "arguments": \{\}\}\n</tool_call>')


def template(name):
    path = TEMPLATES / f"{name}.jinja"
    if not path.exists():
        pytest.skip(f"skipped: {path} not found (set INFLIGHT_DATA_DIR to ../shared/data)")
    return str(path)


def serve(*args):
    # Templates that render tools write long system prompts.
    s = ServerProcess(["--max-model-len", "1024", *args])
    s.wait_ready()
    return s


@pytest.fixture(scope="module")
def hermes_server():
    # Qwen2.5's template renders the tools and teaches <tool_call> JSON blocks: hermes, found
    # from the template (no --tool-call-parser).
    s = serve("--chat-template", template("Qwen-Qwen2.5-7B-Instruct"))
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def hermes_client(hermes_server):
    from openai import OpenAI
    return OpenAI(base_url=hermes_server.url + "/v1", api_key="unused", max_retries=0,
                  timeout=120)


def request(regex, **kwargs):
    return dict(model="smollm2", messages=MESSAGES, tools=[WEATHER, TIME], temperature=0,
                max_tokens=120, extra_body={"guided_regex": regex}, **kwargs)


def test_calls_in_a_whole_reply(hermes_client):
    r = hermes_client.chat.completions.create(**request(HERMES_TWO_CALLS))
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert c.message.content == "Let me check."
    assert [t.function.name for t in c.message.tool_calls] == ["get_weather", "get_time"]
    args = json.loads(c.message.tool_calls[0].function.arguments)
    assert args["city"] == "Paris" and args["days"] in (1, 2, 3)
    assert json.loads(c.message.tool_calls[1].function.arguments) == {}
    assert len({t.id for t in c.message.tool_calls}) == 2


def test_streamed_calls_arrive_as_deltas(hermes_client):
    whole = hermes_client.chat.completions.create(**request(HERMES_TWO_CALLS)).choices[0]
    chunks = [ch for ch in hermes_client.chat.completions.create(stream=True,
                                                                 **request(HERMES_TWO_CALLS))
              if ch.choices]
    content = "".join(ch.choices[0].delta.content or "" for ch in chunks)
    assert content.strip() == whole.message.content
    deltas = [tc for ch in chunks for tc in (ch.choices[0].delta.tool_calls or [])]
    firsts = [tc for tc in deltas if tc.id]
    # One first delta per call: id, type, name, empty arguments; in order of index.
    assert [tc.index for tc in firsts] == [0, 1]
    assert [tc.function.name for tc in firsts] == ["get_weather", "get_time"]
    assert all(tc.type == "function" and tc.function.arguments == "" for tc in firsts)
    fragments = [tc for tc in deltas if not tc.id]
    assert all(tc.function.name is None for tc in fragments)
    # The first call's arguments come in several fragments, as their tokens are generated.
    assert sum(tc.index == 0 for tc in fragments) > 2
    for i, call in enumerate(whole.message.tool_calls):
        streamed = "".join(tc.function.arguments for tc in fragments if tc.index == i)
        assert json.loads(streamed) == json.loads(call.function.arguments)
    # Content comes before the first call's delta.
    first_call = next(i for i, ch in enumerate(chunks) if ch.choices[0].delta.tool_calls)
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks[:first_call]) == content
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_openai_stream_helper_reassembles_the_calls(hermes_client):
    kwargs = request(HERMES_TWO_CALLS)
    with hermes_client.chat.completions.stream(**kwargs) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_completion()
    assert "tool_calls.function.arguments.delta" in kinds
    assert "tool_calls.function.arguments.done" in kinds
    whole = hermes_client.chat.completions.create(**kwargs).choices[0]
    calls = final.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "get_time"]
    for got, want in zip(calls, whole.message.tool_calls):
        assert json.loads(got.function.arguments) == json.loads(want.function.arguments)


def test_what_is_not_a_call_streams_as_content(hermes_client):
    regex = r"<tool_call>no call here</tool_call> Paris is sunny\."
    whole = hermes_client.chat.completions.create(**request(regex)).choices[0]
    assert whole.finish_reason == "stop" and not whole.message.tool_calls
    chunks = [ch for ch in hermes_client.chat.completions.create(stream=True, **request(regex))
              if ch.choices]
    assert not any(ch.choices[0].delta.tool_calls for ch in chunks)
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == whole.message.content
    assert whole.message.content == "<tool_call>no call here</tool_call> Paris is sunny."


def test_qwen3_coder_values_take_the_schema_types():
    s = serve("--chat-template", template("Qwen3-Coder"), "--tool-call-parser", "qwen3_coder")
    try:
        from openai import OpenAI
        client = OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        regex = (r"Checking\.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                 r"</parameter>\n<parameter=days>\n[1-3]\n</parameter>\n</function>\n</tool_call>")
        whole = client.chat.completions.create(**request(regex)).choices[0]
        assert whole.finish_reason == "tool_calls"
        args = json.loads(whole.message.tool_calls[0].function.arguments)
        assert args["city"] == "Paris" and args["days"] in (1, 2, 3)  # an integer, not "2"
        chunks = [ch for ch in client.chat.completions.create(stream=True, **request(regex))
                  if ch.choices]
        deltas = [tc for ch in chunks for tc in (ch.choices[0].delta.tool_calls or [])]
        assert deltas[0].function.name == "get_weather"
        streamed = "".join(tc.function.arguments for tc in deltas)
        assert json.loads(streamed) == args
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("name, regex", [
    # Mistral Small 3.2: [TOOL_CALLS]name[ARGS]{...}, found from the template.
    ("Mistral-Small-3.2-24B-Instruct-2506",
     r'\[TOOL_CALLS\]get_weather\[ARGS\]\{"city": "Paris", "days": [1-3]\}'),
    # LFM2: a pythonic list inside <|tool_call_start|> ... <|tool_call_end|>.
    ("LFM2.5-8B-A1B",
     r'<\|tool_call_start\|>\[get_weather\(city="Paris", days=[1-3]\)\]<\|tool_call_end\|>'),
    # GLM-4.6: <arg_key>/<arg_value> pairs, the integer written as JSON.
    ("GLM-4.6",
     r'<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n'
     r'<arg_key>days</arg_key>\n<arg_value>[1-3]</arg_value>\n</tool_call>'),
    # Kimi K2: a section of calls between special tokens, ids functions.NAME:INDEX.
    ("moonshotai-Kimi-K2",
     r'<\|tool_calls_section_begin\|><\|tool_call_begin\|>functions\.get_weather:0'
     r'<\|tool_call_argument_begin\|>\{"city": "Paris", "days": [1-3]\}<\|tool_call_end\|>'
     r'<\|tool_calls_section_end\|>'),
    # ByteDance Seed-OSS: Qwen3-Coder's XML inside <seed:tool_call>.
    ("ByteDance-Seed-OSS",
     r'<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n'
     r'<parameter=days>[1-3]</parameter>\n</function>\n</seed:tool_call>'),
])
def test_format_found_from_the_template(name, regex):
    s = serve("--chat-template", template(name))
    try:
        from openai import OpenAI
        client = OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        whole = client.chat.completions.create(**request(regex)).choices[0]
        assert whole.finish_reason == "tool_calls", whole
        args = json.loads(whole.message.tool_calls[0].function.arguments)
        assert args["city"] == "Paris" and args["days"] in (1, 2, 3)
        chunks = [ch for ch in client.chat.completions.create(stream=True, **request(regex))
                  if ch.choices]
        deltas = [tc for ch in chunks for tc in (ch.choices[0].delta.tool_calls or [])]
        assert [tc.function.name for tc in deltas if tc.id] == ["get_weather"]
        assert json.loads("".join(tc.function.arguments for tc in deltas)) == args
    finally:
        assert s.stop() == 0


def test_tools_refused_when_the_template_cannot_show_them(base_url):
    # SmolLM2's own template never reads `tools`: the model would answer in prose.
    r = post_json(base_url + "/v1/chat/completions", {
        "messages": MESSAGES, "tools": [WEATHER], "max_tokens": 4})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "tools"
    assert "does not support tools" in err["message"] and "--chat-template" in err["message"]
    # What needs no template support: tool_choice "none", or a forced call (the grammar writes it).
    r = post_json(base_url + "/v1/chat/completions", {
        "messages": MESSAGES, "tools": [WEATHER], "tool_choice": "none", "max_tokens": 4})
    assert r.status_code == 200, r.text
    r = post_json(base_url + "/v1/chat/completions", {
        "messages": MESSAGES, "tools": [WEATHER], "tool_choice": "required", "max_tokens": 40,
        "presence_penalty": 2.0})
    assert r.status_code == 200, r.text


def test_tools_refused_when_the_call_format_is_unknown():
    # MiniMax-M2's template renders tools, in a format no parser here reads.
    s = serve("--chat-template", template("MiniMax-M2"))
    try:
        r = post_json(s.url + "/v1/chat/completions", {
            "messages": MESSAGES, "tools": [WEATHER], "max_tokens": 4})
        assert r.status_code == 400
        err = r.json()["error"]
        assert err["param"] == "tools" and "--tool-call-parser" in err["message"]
    finally:
        assert s.stop() == 0
