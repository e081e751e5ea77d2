"""`inflight tokenize` / `inflight detokenize` against the reference tokenizers.

Oracles: the Hugging Face `tokenizers` package on the three tokenizer.json files in
shared/data/tokenizers/hf, and `tiktoken` on the cl100k_base / o200k_base rank files. Inputs:
a deterministic subset of the prompt corpus (INFLIGHT_FULL_CORPUS=1 for all of it; the subset
keeps a 2-core CI run short) plus adversarial strings.

Run: /work/main/.venv/bin/python -m pytest tests/tokenizer/test_hf_agreement.py
The binary is $INFLIGHT_BIN, else <repo>/build/bin/inflight; data is $INFLIGHT_DATA_DIR, else
<repo>/../shared/data. Tests skip when either is missing.
"""
import json
import lzma
import os
import random
import subprocess
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("INFLIGHT_DATA_DIR", REPO.parent / "shared" / "data"))
BIN = Path(os.environ.get("INFLIGHT_BIN", REPO / "build" / "bin" / "inflight"))
SUBSET = 3000

ADVERSARIAL = [
    "", " ", "  ", "   \n  \n", "\t\t\n\r\n\r", "\u3000\u00a0\u2028x\u2029 \u0085",
    "Hello world", " Hello", "HELLO'S it's I'LL we'Re", "\u017fs 's \u212a",
    "\u00e9 e\u0301 \u212b A\u030a \u1100\u1161\u11a8 \u0915\u093c",  # NFC work for Qwen
    "a\u0302\u0323 \u0061\u0301\u0301\u0301\u0301",
    "\U0001f999\U0001f680 \U0001f636\u200d\U0001f32b\ufe0f \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f1fa\U0001f1f8",
    "\u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd \u4f60\u597d\u4e16\u754c \u3053\u3093\u306b\u3061\u306f \ud55c\uad6d\uc5b4",
    "\u1780\u17b6\u1793\u17cb\u178f\u17c2 \u0928\u092e\u0938\u094d\u0924\u0947 \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
    "\u200b\u200c\u200d\ufeff zero width",
    "1234567890 \u0661\u0662\u0663 \u00bd \u2163 3.14159 1,000,000",
    "a" * 10000, "ab1" * 3000, "\U0001f600" * 2000, " " * 5000 + "x", "\n" * 300,
    "<|im_start|>user\nhi<|im_end|>", "<|im_start", "im_start|>", "<|endoftext|>", "<|endoftext",
    "<|begin_of_text|>Hello<|eot_id|>", "<s>[INST] hi [/INST]</s>", "< s >", "<<s>>",
    "x<|fim_prefix|>y<|fim_suffix|>z<|fim_middle|>", "<tool_call>{}</tool_call>", "<think>\n</think>",
    "def f(x):\n    return x**2  # comment\n\n\tpass", "https://example.com/a?b=c&d=e#f",
    "\\u0000 \x00 \x01\x7f", "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m",
]


def have(path):
    return path.exists() or Path(str(path) + ".xz").exists()


def unpack(rel, tmp):
    """The shared data file `rel`, unpacked from .xz into `tmp` when needed."""
    p = DATA / rel
    if p.exists():
        return p
    out = tmp / "unpacked" / rel  # keeps the name (tiktoken needs it) and stays unique
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(lzma.decompress((DATA / (rel + ".xz")).read_bytes()))
    return out


requires = pytest.mark.skipif(not BIN.exists() or not DATA.exists(),
                              reason=f"needs {BIN} (set INFLIGHT_BIN) and {DATA}")


@pytest.fixture(scope="session")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("tokenizer-data")


@pytest.fixture(scope="session")
def corpus(tmp):
    if not have(DATA / "prompts/prompts_sharegpt_like.json"):
        pytest.skip("prompt corpus not found")
    items = json.loads(unpack("prompts/prompts_sharegpt_like.json", tmp).read_text())
    texts = [c["value"] for item in items for c in item["conversations"]]
    if os.environ.get("INFLIGHT_FULL_CORPUS") != "1":
        texts = random.Random(1234).sample(texts, min(SUBSET, len(texts)))
    return texts + ADVERSARIAL


def run_jsonl(args, lines):
    inp = "".join(json.dumps(x) + "\n" for x in lines).encode()
    out = subprocess.run([str(BIN)] + args, input=inp, capture_output=True, timeout=1800)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    # split("\n"), not splitlines(): JSON strings may hold raw U+2028 / U+0085.
    return [json.loads(line) for line in out.stdout.decode().split("\n")[:-1]]


def tokenize(path, texts, add_special, parse_special):
    args = ["tokenize", "--tokenizer", str(path), "--jsonl"]
    args += ["--add-special"] if add_special else []
    args += ["--parse-special"] if parse_special else []
    return run_jsonl(args, texts)


def detokenize(path, ids, skip_special):
    args = ["detokenize", "--tokenizer", str(path), "--jsonl"]
    return run_jsonl(args + (["--skip-special"] if skip_special else []), ids)


def assert_same(texts, got, want, what):
    bad = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
    assert len(got) == len(want)
    if bad:
        t, g, w = bad[0]
        i = next((k for k in range(min(len(g), len(w))) if g[k] != w[k]), min(len(g), len(w)))
        pytest.fail(f"{what}: {len(bad)}/{len(texts)} differ; first {t[:120]!r} at {i}: "
                    f"got {g[max(0, i - 3):i + 5]} want {w[max(0, i - 3):i + 5]}")


HF = ["llama3_1", "qwen3", "mistral-7b-v0.1"]


@requires
@pytest.mark.parametrize("name", HF)
def test_hf_tokenizer_json(name, corpus, tmp):
    from tokenizers import Tokenizer
    if not have(DATA / f"tokenizers/hf/{name}/tokenizer.json"):
        pytest.skip(f"{name} tokenizer.json not found")
    d = tmp / name
    d.mkdir(exist_ok=True)
    (d / "tokenizer.json").write_bytes(unpack(f"tokenizers/hf/{name}/tokenizer.json", tmp).read_bytes())
    (d / "tokenizer_config.json").write_bytes((DATA / f"tokenizers/hf/{name}/tokenizer_config.json").read_bytes())
    ref = Tokenizer.from_file(str(d / "tokenizer.json"))

    # Special tokens in the text are matched (the package's default) and BOS added.
    got = tokenize(d, corpus, add_special=True, parse_special=True)
    want = [e.ids for e in ref.encode_batch(corpus, add_special_tokens=True)]
    assert_same(corpus, got, want, f"{name} encode(add_special, parse_special)")

    # Special tokens written in the text are plain text.
    ref.encode_special_tokens = True
    plain = tokenize(d, corpus, add_special=False, parse_special=False)
    want = [e.ids for e in ref.encode_batch(corpus, add_special_tokens=False)]
    assert_same(corpus, plain, want, f"{name} encode(plain)")

    # Decoding agrees with the package, and round-trips (up to Qwen's NFC).
    text = detokenize(d, got, skip_special=True)
    assert_same(corpus, text, ref.decode_batch(got, skip_special_tokens=True), f"{name} decode")
    back = detokenize(d, plain, skip_special=False)
    nfc = name == "qwen3"
    expect = [unicodedata.normalize("NFC", t) if nfc else t for t in corpus]
    assert_same(corpus, back, expect, f"{name} decode(encode(x)) == x")


def tiktoken_encoding(name, path):
    import tiktoken
    import tiktoken_ext.openai_public as public
    from tiktoken.load import load_tiktoken_bpe
    # The package's own definition (pattern, special tokens), with the ranks read locally.
    original = public.load_tiktoken_bpe
    public.load_tiktoken_bpe = lambda *a, **k: load_tiktoken_bpe(str(path))
    try:
        spec = getattr(public, name)()
    finally:
        public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**spec)


@requires
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_tiktoken(name, corpus, tmp):
    if not have(DATA / f"tokenizers/tiktoken/{name}.tiktoken"):
        pytest.skip(f"{name}.tiktoken not found")
    path = unpack(f"tokenizers/tiktoken/{name}.tiktoken", tmp)
    enc = tiktoken_encoding(name, path)
    got = tokenize(path, corpus, add_special=False, parse_special=True)
    assert_same(corpus, got, [enc.encode(t, allowed_special="all") for t in corpus], f"{name} special")
    plain = tokenize(path, corpus, add_special=False, parse_special=False)
    assert_same(corpus, plain, [enc.encode_ordinary(t) for t in corpus], f"{name} ordinary")
    assert_same(corpus, detokenize(path, plain, skip_special=False), corpus, f"{name} round trip")


@requires
def test_invalid_utf8_is_replaced_like_python(tmp):
    """Raw stdin bytes: ill-formed UTF-8 becomes U+FFFD per maximal subpart, as Python's
    errors="replace" does, and is then tokenized like that text."""
    from tokenizers import Tokenizer
    if not have(DATA / "tokenizers/hf/llama3_1/tokenizer.json"):
        pytest.skip("llama3_1 tokenizer.json not found")
    path = unpack("tokenizers/hf/llama3_1/tokenizer.json", tmp)
    ref = Tokenizer.from_file(str(path))
    for raw in [b"a\xffb", b"\xe2\x82", b"\xe2\x82A", b"\xc0\xaf", b"\xed\xa0\x80x",
                b"\xf4\x90\x80\x80", b"ok \xf0\x9f\xa6", b"\x80" * 10]:
        out = subprocess.run([str(BIN), "tokenize", "--tokenizer", str(path)], input=raw,
                             capture_output=True, timeout=120)
        assert out.returncode == 0, out.stderr.decode()
        want = ref.encode(raw.decode("utf-8", errors="replace"), add_special_tokens=False).ids
        assert json.loads(out.stdout) == want, raw


# Pipelines the shipped files do not use, made by swapping parts of a real tokenizer.json; the
# package is the oracle for each. (file, normalizer, pre_tokenizer, decoder)
VARIANTS = {
    "metaspace_first": ("mistral-7b-v0.1", None,
                        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                         "split": True},
                        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                         "split": True}),
    "metaspace_always_bytes": ("mistral-7b-v0.1", None,
                               {"type": "Metaspace", "replacement": "\u2581",
                                "prepend_scheme": "always", "split": False},
                               {"type": "Sequence", "decoders": [
                                   {"type": "Metaspace", "replacement": "\u2581",
                                    "prepend_scheme": "always", "split": False},
                                   {"type": "ByteFallback"}, {"type": "Fuse"}]}),
    "digits_punct_split": ("llama3_1", {"type": "NFC"},
                           {"type": "Sequence", "pretokenizers": [
                               {"type": "Digits", "individual_digits": True},
                               {"type": "Punctuation", "behavior": "Contiguous"},
                               {"type": "Split", "pattern": {"String": "e"},
                                "behavior": "MergedWithNext", "invert": False},
                               {"type": "ByteLevel", "add_prefix_space": False,
                                "trim_offsets": False, "use_regex": True}]},
                           {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                            "use_regex": True}),
    "byte_level_prefix": ("llama3_1", None,
                          {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
                          {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True}),
}


@requires
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_pipeline_variants(variant, corpus, tmp):
    from tokenizers import Tokenizer
    base, normalizer, pre, decoder = VARIANTS[variant]
    if not have(DATA / f"tokenizers/hf/{base}/tokenizer.json"):
        pytest.skip(f"{base} tokenizer.json not found")
    spec = json.loads(unpack(f"tokenizers/hf/{base}/tokenizer.json", tmp).read_text())
    spec["normalizer"], spec["pre_tokenizer"], spec["decoder"] = normalizer, pre, decoder
    path = tmp / f"variant-{variant}.json"
    path.write_text(json.dumps(spec))
    ref = Tokenizer.from_file(str(path))
    texts = corpus[::6] + ADVERSARIAL  # a sixth of the subset keeps this quick
    got = tokenize(path, texts, add_special=True, parse_special=True)
    assert_same(texts, got, [e.ids for e in ref.encode_batch(texts, add_special_tokens=True)],
                f"{variant} encode")
    assert_same(texts, detokenize(path, got, skip_special=True),
                ref.decode_batch(got, skip_special_tokens=True), f"{variant} decode")


@requires
def test_unsupported_pipeline_is_reported_not_guessed(tmp):
    """A Split after ByteLevel would see HF's byte alphabet ("Ġ"), which we do not emulate: the
    load must fail with a message naming the place, not tokenize differently."""
    if not have(DATA / "tokenizers/hf/llama3_1/tokenizer.json"):
        pytest.skip("llama3_1 tokenizer.json not found")
    spec = json.loads(unpack("tokenizers/hf/llama3_1/tokenizer.json", tmp).read_text())
    spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": False}]}
    path = tmp / "unsupported.json"
    path.write_text(json.dumps(spec))
    out = subprocess.run([str(BIN), "tokenize", "--tokenizer", str(path)], input=b"hi",
                         capture_output=True, timeout=120)
    assert out.returncode != 0
    assert "pre_tokenizer.pretokenizers[1]" in out.stderr.decode(), out.stderr.decode()
