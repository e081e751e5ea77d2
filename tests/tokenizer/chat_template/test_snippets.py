"""Small templates (snippets.txt) that pin down jinja2 semantics one construct at a time:
`inflight chat-template` must render each as jinja2 does under transformers' settings, or fail
where jinja2 fails. Finds the binary like test_chat_templates.py."""
import json
import pathlib
import subprocess

import pytest

import render_jinja
from test_chat_templates import FIXED_NOW, binary

HERE = pathlib.Path(__file__).resolve().parent


def load_cases():
    text = (HERE / "snippets.txt").read_text(encoding="utf-8")
    chunks = text.split("\n====\n")[1:]  # the first chunk is the header comment
    cases = []
    for i, chunk in enumerate(chunks):
        context = {}
        if chunk.startswith("context: "):
            first, _, chunk = chunk.partition("\n")
            context = json.loads(first[len("context: "):])
        cases.append(pytest.param(chunk, context, id=f"case{i:03d}"))
    return cases


# One snippet checks that unknown escapes like "\q" stay as written (Python warns about them).
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("source,context", load_cases())
def test_snippet(source, context, tmp_path):
    if not binary().exists():
        pytest.skip(f"skipped: {binary()} not built (set INFLIGHT_BIN)")
    try:
        expected, expected_error = render_jinja.render(source, context, FIXED_NOW), None
    except Exception as e:
        expected, expected_error = None, f"{type(e).__name__}: {e}"
    (tmp_path / "t.jinja").write_text(source, encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps(context), encoding="utf-8")
    r = subprocess.run([str(binary()), "chat-template", "--template", str(tmp_path / "t.jinja"),
                        "--context", str(tmp_path / "c.json"), "--now", FIXED_NOW],
                       capture_output=True, timeout=60)
    if expected_error is not None:
        assert r.returncode != 0, f"jinja2 raised {expected_error}; inflight rendered {r.stdout!r}"
        if expected_error.startswith("TemplateError: "):  # the template's raise_exception()
            assert expected_error[len("TemplateError: "):] in r.stderr.decode("utf-8")
        return
    assert r.returncode == 0, f"inflight failed: {r.stderr.decode()}; jinja2: {expected!r}"
    assert r.stdout.decode("utf-8") == expected
