"""LLM.generate against `inflight generate`: the same tokens, greedy and seeded."""

import json
import subprocess

from package_env import BIN, CLI_LIMITS, MODEL, need_bin

from inflight import SamplingParams

PROMPTS = ["Once upon a time", "The capital of France is", "def fibonacci(n):"]


def cli_generate(tmp_path, lines):
    need_bin()
    f = tmp_path / "requests.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = subprocess.run([str(BIN), "generate", "--model", str(MODEL), "--prompts-file", str(f),
                          *CLI_LIMITS], capture_output=True, text=True, timeout=600, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_greedy_and_seeded_match_cli(llm, tmp_path):
    greedy = SamplingParams(temperature=0.0, max_tokens=24)
    seeded = SamplingParams(temperature=0.8, top_p=0.9, top_k=40, seed=1234, max_tokens=24)
    params = [greedy] * len(PROMPTS) + [seeded] * len(PROMPTS)
    lines = [{"prompt": p, "max_tokens": 24, "temperature": 0.0} for p in PROMPTS]
    lines += [{"prompt": p, "max_tokens": 24, "temperature": 0.8, "top_p": 0.9, "top_k": 40,
               "seed": 1234} for p in PROMPTS]
    expected = cli_generate(tmp_path, lines)
    outs = llm.generate(PROMPTS + PROMPTS, params, use_tqdm=False)
    assert len(outs) == len(expected)
    for out, exp in zip(outs, expected):
        c = out.outputs[0]
        assert c.token_ids == exp["token_ids"], (out.prompt, c.text, exp["text"])
        assert c.text == exp["text"]
        assert c.finish_reason == exp["finish_reason"]
        assert out.usage.prompt_tokens == exp["usage"]["prompt_tokens"]
        assert out.usage.completion_tokens == len(c.token_ids)
        assert out.prompt_token_ids and len(out.prompt_token_ids) == out.usage.prompt_tokens
        assert out.finished and out.metrics.ttft > 0 and out.metrics.e2e >= out.metrics.ttft


def test_token_id_prompts_logprobs_and_n(llm):
    ids = llm.get_tokenizer().encode("Once upon a time")
    assert llm.get_tokenizer().decode(ids) == "Once upon a time"
    by_text = llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=8),
                           use_tqdm=False)[0]
    by_ids = llm.generate({"prompt_token_ids": ids},
                          SamplingParams(temperature=0, max_tokens=8, logprobs=2, n=2),
                          use_tqdm=False)[0]
    assert by_ids.prompt_token_ids == ids == by_text.prompt_token_ids
    assert len(by_ids.outputs) == 2
    for c in by_ids.outputs:  # greedy: every choice is the same
        assert c.token_ids == by_text.outputs[0].token_ids
        assert len(c.logprobs) == len(c.token_ids)
        for token, entry in zip(c.token_ids, c.logprobs):
            assert entry[token].rank == 1 and entry[token].logprob <= 0
            assert len(entry) == 2


def test_stop_string(llm):
    out = llm.generate("1, 2, 3, 4,", SamplingParams(temperature=0, max_tokens=32, stop=" 7"),
                       use_tqdm=False)[0].outputs[0]
    assert out.finish_reason == "stop" and out.stop_reason == " 7"
    assert " 7" not in out.text
