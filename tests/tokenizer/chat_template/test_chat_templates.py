"""Every real chat template x every conversation in conversations.json, with and without
add_generation_prompt: `inflight chat-template` must render byte-identical to Python jinja2
configured as transformers configures it (render_jinja.py), or fail where jinja2 raises.

  INFLIGHT_BIN=build/bin/inflight .venv/bin/python -m pytest tests/tokenizer/chat_template

The binary is $INFLIGHT_BIN or <repo>/build/bin/inflight; the templates are in
$INFLIGHT_DATA_DIR/chat-templates (default <repo>/../shared/data). Either missing: skipped.
"""
import json
import os
import pathlib
import subprocess

import pytest

import render_jinja

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
FIXED_NOW = "2024-07-26T12:34:56"
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}


def binary():
    return pathlib.Path(os.environ.get("INFLIGHT_BIN") or REPO / "build" / "bin" / "inflight")


def templates_dir():
    root = os.environ.get("INFLIGHT_DATA_DIR") or str(REPO.parent / "shared" / "data")
    return pathlib.Path(root) / "chat-templates"


def template_names():
    d = templates_dir()
    return sorted(p.name for p in d.glob("*.jinja")) if d.is_dir() else []


CONVERSATIONS = json.loads((HERE / "conversations.json").read_text(encoding="utf-8"))["conversations"]


def long_conversation(turns=40):
    """A system prompt and `turns` user/assistant pairs of ~2 KB each (about 160 KB in all)."""
    line = "Line {i}: the quick brown fox — naïve café, 数据 {i}; \"quoted\" and 'single'.\n"
    messages = [{"role": "system", "content": "You are a patient tutor. " * 20}]
    for t in range(turns):
        body = "".join(line.format(i=i) for i in range(t % 7 + 20))
        messages.append({"role": "user", "content": f"Question {t}:\n{body}"})
        messages.append({"role": "assistant", "content": f"Answer {t}:\n{body[::-1]}"})
    messages.append({"role": "user", "content": "Summarise everything."})
    return {"messages": messages, "tools": None}


CONVERSATIONS["long_conversation"] = long_conversation()


def contexts():
    for name, conv in CONVERSATIONS.items():
        for agp in (True, False):
            ctx = dict(conv)
            ctx["add_generation_prompt"] = agp
            ctx.update(SPECIAL_TOKENS)
            yield f"{name}-{'gen' if agp else 'nogen'}", ctx


CONTEXTS = dict(contexts())


def render_python(source, ctx):
    try:
        return render_jinja.render(source, ctx, FIXED_NOW), None
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"


def render_inflight(template_path, ctx, tmp_path):
    ctx_file = tmp_path / "context.json"
    ctx_file.write_text(json.dumps(ctx, ensure_ascii=False), encoding="utf-8")
    r = subprocess.run([str(binary()), "chat-template", "--template", str(template_path),
                        "--context", str(ctx_file), "--now", FIXED_NOW],
                       capture_output=True, timeout=60)
    if r.returncode != 0:
        return None, r.stderr.decode("utf-8", "replace").strip()
    return r.stdout.decode("utf-8"), None


@pytest.fixture(scope="module", autouse=True)
def require_inputs():
    if not binary().exists():
        pytest.skip(f"skipped: {binary()} not built (set INFLIGHT_BIN)")
    if not template_names():
        pytest.skip(f"skipped: no templates in {templates_dir()} (set INFLIGHT_DATA_DIR)")


@pytest.mark.parametrize("context_name", list(CONTEXTS))
@pytest.mark.parametrize("template", template_names() or ["<none>"])
def test_matches_jinja2(template, context_name, tmp_path):
    path = templates_dir() / template
    source = path.read_text(encoding="utf-8")
    ctx = CONTEXTS[context_name]
    expected, expected_error = render_python(source, ctx)
    actual, actual_error = render_inflight(path, ctx, tmp_path)
    if expected_error is not None:
        assert actual_error is not None, (
            f"jinja2 raised ({expected_error}) but inflight rendered:\n{actual!r}")
        if expected_error.startswith("TemplateError: "):  # the template's raise_exception()
            assert expected_error[len("TemplateError: "):] in actual_error
        return
    assert actual_error is None, f"inflight failed ({actual_error}); jinja2 rendered:\n{expected!r}"
    assert actual == expected
