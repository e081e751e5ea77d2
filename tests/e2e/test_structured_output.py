"""Structured output end to end: OpenAI response_format (validated with `jsonschema`), vLLM's
guided_* / structured_outputs, tool_choice required and named, TGI grammar over raw HTTP, and
clear 400s for constraints that do not compile."""

import json
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import post_json, sse_events

jsonschema = pytest.importorskip("jsonschema")

NAME = {"type": "string", "maxLength": 12}
SCHEMAS = [
    # flat objects of each scalar kind
    {"type": "object", "properties": {"name": NAME, "age": {"type": "integer", "minimum": 0,
                                                            "maximum": 120}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    {"type": "object", "properties": {"price": {"type": "number", "minimum": 0, "maximum": 99}},
     "required": ["price"]},
    {"type": "object", "properties": {"note": {"type": ["string", "null"], "maxLength": 8}},
     "required": ["note"]},
    # enums and consts
    {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}},
     "required": ["color"]},
    {"type": "object", "properties": {"level": {"enum": [1, 2, 3]},
                                      "kind": {"const": "fixed"}},
     "required": ["level", "kind"]},
    {"type": "string", "enum": ["yes", "no", "maybe"]},
    # arrays with minItems / maxItems
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 2,
     "maxItems": 4},
    {"type": "object", "properties": {"tags": {"type": "array", "items": NAME, "minItems": 1,
                                               "maxItems": 3}},
     "required": ["tags"]},
    {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 3, "maxItems": 3},
    {"type": "array", "prefixItems": [{"type": "integer", "minimum": 0, "maximum": 9},
                                      {"type": "boolean"}], "items": False},
    # nested objects
    {"type": "object", "properties": {
        "person": {"type": "object", "properties": {"name": NAME, "city": NAME},
                   "required": ["name", "city"]}},
     "required": ["person"]},
    {"type": "object", "properties": {
        "a": {"type": "object", "properties": {
            "b": {"type": "object", "properties": {"c": {"type": "boolean"}}, "required": ["c"]}},
            "required": ["b"]}},
     "required": ["a"]},
    {"type": "object", "properties": {
        "items": {"type": "array", "maxItems": 2, "items": {
            "type": "object", "properties": {"id": {"type": "integer", "minimum": 1,
                                                    "maximum": 99},
                                             "done": {"type": "boolean"}},
            "required": ["id", "done"]}}},
     "required": ["items"]},
    # $ref and $defs
    {"$defs": {"point": {"type": "object", "properties": {
        "x": {"type": "integer", "minimum": -9, "maximum": 9},
        "y": {"type": "integer", "minimum": -9, "maximum": 9}}, "required": ["x", "y"]}},
     "type": "object", "properties": {"from": {"$ref": "#/$defs/point"},
                                      "to": {"$ref": "#/$defs/point"}},
     "required": ["from", "to"]},
    {"definitions": {"color": {"enum": ["red", "blue"]}},
     "type": "array", "items": {"$ref": "#/definitions/color"}, "minItems": 1, "maxItems": 2},
    # anyOf / oneOf, patterns, string formats
    {"type": "object", "properties": {"v": {"anyOf": [{"type": "integer", "minimum": 0,
                                                       "maximum": 9},
                                                      {"type": "boolean"}]}},
     "required": ["v"]},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}},
     "required": ["code"]},
    {"type": "object", "properties": {"id": {"type": "string", "minLength": 2, "maxLength": 4}},
     "required": ["id"]},
    {"type": "object", "properties": {
        "user": {"type": "object", "properties": {
            "name": NAME, "roles": {"type": "array", "items": {"enum": ["admin", "dev"]},
                                    "minItems": 1, "maxItems": 2}},
            "required": ["name", "roles"]},
        "active": {"type": "boolean"}},
     "required": ["user", "active"], "additionalProperties": False},
]
assert len(SCHEMAS) == 20


def ask(client, model_name, schema, i):
    return client.chat.completions.create(
        model=model_name, temperature=0, max_tokens=120,
        messages=[{"role": "user", "content": "Reply with a short JSON value."}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": f"s{i}", "schema": schema, "strict": True}})


def test_response_format_json_schema_validates(client, model_name):
    # Concurrently: the requests share steps, each row under its own mask.
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda a: ask(client, model_name, *a),
                                [(s, i) for i, s in enumerate(SCHEMAS)]))
    for i, (schema, r) in enumerate(zip(SCHEMAS, replies)):
        c = r.choices[0]
        assert c.finish_reason == "stop", (i, c.message.content)
        jsonschema.validate(json.loads(c.message.content), schema)


def test_response_format_json_object_and_stream(client, model_name):
    kwargs = dict(model=model_name, temperature=0, max_tokens=120,
                  messages=[{"role": "user", "content": "Give a JSON object with one key."}],
                  response_format={"type": "json_object"})
    r = client.chat.completions.create(**kwargs)
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    text = "".join(ch.choices[0].delta.content or ""
                   for ch in client.chat.completions.create(stream=True, **kwargs) if ch.choices)
    assert text == r.choices[0].message.content


def test_completions_guided_fields(client, model_name):
    def complete(**extra):
        r = client.completions.create(model=model_name, prompt="Answer:", max_tokens=24,
                                      temperature=0, extra_body=extra)
        return r.choices[0]

    c = complete(guided_choice=["alpha", "beta", "gamma"])
    assert c.text in ("alpha", "beta", "gamma") and c.finish_reason == "stop"
    c = complete(guided_regex="[0-9]{3}-[a-z]{2}")
    assert re.fullmatch("[0-9]{3}-[a-z]{2}", c.text), c.text
    c = complete(guided_json={"type": "object", "properties": {"n": {"type": "integer"}},
                              "required": ["n"], "additionalProperties": False})
    assert isinstance(json.loads(c.text)["n"], int)
    c = complete(guided_grammar='root ::= "x" ("y" | "z") "!"')
    assert c.text in ("xy!", "xz!")
    c = complete(structured_outputs={"choice": ["up", "down"]})
    assert c.text in ("up", "down")
    c = complete(structured_outputs={"regex": "(cat|dog)s?"})
    assert re.fullmatch("(cat|dog)s?", c.text), c.text
    # n > 1 and sampling: every choice obeys the constraint.
    r = client.completions.create(model=model_name, prompt="Pick:", max_tokens=8, n=3, seed=1,
                                  temperature=1.0, extra_body={"guided_choice": ["x1", "y22"]})
    assert all(c.text in ("x1", "y22") for c in r.choices)


CALC = {"type": "function", "function": {
    "name": "add", "description": "Adds two integers",
    "parameters": {"type": "object", "properties": {
        "a": {"type": "integer", "minimum": 0, "maximum": 99},
        "b": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["a", "b"], "additionalProperties": False}}}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": NAME}, "required": ["city"],
                   "additionalProperties": False}}}


def test_tool_choice_required(client, model_name):
    # At temperature 0 this small model repeats its call until max_tokens: a presence penalty
    # lets it close the list.
    r = client.chat.completions.create(
        model=model_name, temperature=0, max_tokens=120, tools=[CALC, WEATHER],
        tool_choice="required", presence_penalty=2.0,
        messages=[{"role": "user", "content": "What is 2 plus 3?"}])
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert c.message.tool_calls
    for call in c.message.tool_calls:
        tool = {"add": CALC, "get_weather": WEATHER}[call.function.name]
        jsonschema.validate(json.loads(call.function.arguments), tool["function"]["parameters"])


def test_tool_choice_named(client, model_name):
    kwargs = dict(model=model_name, temperature=0, max_tokens=120, tools=[CALC, WEATHER],
                  tool_choice={"type": "function", "function": {"name": "get_weather"}},
                  messages=[{"role": "user", "content": "Weather in Paris?"}])
    r = client.chat.completions.create(**kwargs)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert [call.function.name for call in c.message.tool_calls] == ["get_weather"]
    jsonschema.validate(json.loads(c.message.tool_calls[0].function.arguments),
                        WEATHER["function"]["parameters"])
    # Streamed as OpenAI does: the call's name first, then its arguments in fragments.
    chunks = [ch for ch in client.chat.completions.create(stream=True, **kwargs) if ch.choices]
    calls = [tc for ch in chunks for tc in (ch.choices[0].delta.tool_calls or [])]
    assert [tc.function.name for tc in calls if tc.id] == ["get_weather"]
    assert all(tc.index == 0 for tc in calls) and len(calls) > 2
    assert json.loads("".join(tc.function.arguments for tc in calls)) == json.loads(
        c.message.tool_calls[0].function.arguments)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_tgi_grammar(base_url):
    schema = {"type": "object", "properties": {"city": NAME, "sunny": {"type": "boolean"}},
              "required": ["city", "sunny"]}
    r = post_json(base_url + "/generate", {
        "inputs": "Weather report as JSON:",
        "parameters": {"max_new_tokens": 100, "grammar": {"type": "json", "value": schema}}})
    assert r.status_code == 200, r.text
    jsonschema.validate(json.loads(r.json()["generated_text"]), schema)
    r = post_json(base_url + "/generate_stream", {
        "inputs": "A date:",
        "parameters": {"max_new_tokens": 16,
                       "grammar": {"type": "regex", "value": "20[0-9]{2}-0[1-9]"}}})
    assert r.status_code == 200
    last = json.loads(sse_events(r.text)[-1])
    assert re.fullmatch("20[0-9]{2}-0[1-9]", last["generated_text"]), last


def test_tgi_grammar_with_curl(base_url):
    if not shutil.which("curl"):
        pytest.skip("curl not installed")
    schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}},
              "required": ["answer"]}
    body = {"inputs": "Is the sky blue?",
            "parameters": {"max_new_tokens": 32, "grammar": {"type": "json", "value": schema}}}
    out = subprocess.run(["curl", "-sS", "-H", "Content-Type: application/json", "-d",
                          json.dumps(body), base_url + "/generate"],
                         capture_output=True, timeout=120, check=True).stdout
    jsonschema.validate(json.loads(json.loads(out)["generated_text"]), schema)


@pytest.mark.parametrize("body,param", [
    ({"response_format": {"type": "json_schema",
                          "json_schema": {"name": "x", "schema": {"type": "object",
                                                                  "properties": 3}}}},
     "response_format.json_schema.schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "response_format.json_schema.schema"),
    ({"response_format": {"type": "yaml"}}, "response_format.type"),
    ({"guided_regex": "(unclosed"}, "guided_regex"),
    ({"guided_grammar": "root ::= "}, "guided_grammar"),
    ({"guided_choice": []}, "guided_choice"),
    ({"guided_json": "{not json"}, "guided_json"),
    ({"guided_regex": "a", "guided_choice": ["a"]}, "guided_choice"),
    ({"response_format": {"type": "json_object"}, "tools": [CALC], "tool_choice": "required"},
     "tool_choice"),
    ({"tools": [CALC], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice.function.name"),
])
def test_bad_constraints_are_400_naming_the_field(base_url, body, param):
    r = post_json(base_url + "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "x"}], "max_tokens": 4, **body})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert err["message"]


def test_tgi_bad_grammar_is_400(base_url):
    for grammar, param in [({"type": "regex", "value": "(x"}, "grammar.value"),
                           ({"type": "lark", "value": "x"}, "grammar.type")]:
        r = post_json(base_url + "/generate", {"inputs": "x", "parameters": {"grammar": grammar}})
        assert r.status_code == 400, r.text
        assert param in r.text
