#!/usr/bin/env python3
"""The oracle for chat templates: renders one with Python jinja2 configured exactly as Hugging
Face transformers' `_compile_jinja_template` configures it:

  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                extensions=[<generation tag>, jinja2.ext.loopcontrols])
  filters["tojson"]  = json.dumps(x, ensure_ascii=False, indent=None, separators=None,
                                  sort_keys=False)   (jinja2's own tojson escapes HTML)
  globals["raise_exception"](message) raises jinja2.exceptions.TemplateError(message)
  globals["strftime_now"](format) = datetime.now().strftime(format)

The {% generation %} tag (transformers' AssistantTracker) renders its body; the assistant-mask
bookkeeping it also does does not change the text. `now` pins strftime_now for tests.

  render_jinja.py --template FILE --context FILE [--now 2024-07-26T12:00:00]

prints the rendering exactly (no newline added); on a template error it prints
"error: <Type>: <message>" to stderr and exits with status 1.
"""
import argparse
import functools
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(jinja2.ext.Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def make_environment(now=None):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return (now if now is not None else datetime.now()).strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def parse_now(text):
    if not text:
        return None
    return datetime.fromisoformat(text)


@functools.lru_cache(maxsize=128)
def compile_template(source, now=""):
    return make_environment(parse_now(now)).from_string(source)


def render(source, context, now=""):
    """Renders `source` with the variables in `context` (a dict); raises on template errors."""
    return compile_template(source, now or "").render(**context)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--template", required=True)
    ap.add_argument("--context", required=True, help="JSON object of template variables")
    ap.add_argument("--now", default="", help="fixed time for strftime_now()")
    args = ap.parse_args()
    with open(args.template, encoding="utf-8") as f:
        source = f.read()
    with open(args.context, encoding="utf-8") as f:
        context = json.load(f)
    try:
        text = render(source, context, args.now)
    except Exception as e:  # jinja2 lets Python's own exceptions (TypeError, ...) through
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(text.encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
