"""Bad arguments raise the exception a Python caller expects, naming what is wrong."""

import os
import subprocess
import sys

import pytest

from package_env import MODEL, need_model

from inflight import LLM, SamplingParams


@pytest.mark.parametrize("kwargs, exc, field", [
    ({"temperature": -1.0}, ValueError, "temperature"),
    ({"temperature": float("nan")}, ValueError, "temperature"),
    ({"temperature": "hot"}, TypeError, "temperature"),
    ({"n": 0}, ValueError, "n"),
    ({"n": 2.0}, TypeError, "n"),
    ({"top_p": 0.0}, ValueError, "top_p"),
    ({"top_k": -2}, ValueError, "top_k"),
    ({"min_p": 1.5}, ValueError, "min_p"),
    ({"repetition_penalty": 0.0}, ValueError, "repetition_penalty"),
    ({"frequency_penalty": 3.0}, ValueError, "frequency_penalty"),
    ({"presence_penalty": -2.5}, ValueError, "presence_penalty"),
    ({"max_tokens": 0}, ValueError, "max_tokens"),
    ({"min_tokens": 5, "max_tokens": 2}, ValueError, "min_tokens"),
    ({"seed": -1}, ValueError, "seed"),
    ({"seed": "1"}, TypeError, "seed"),
    ({"stop": ""}, ValueError, "stop"),
    ({"stop": [1]}, TypeError, "stop"),
    ({"stop_token_ids": ["a"]}, TypeError, "stop_token_ids"),
    ({"logit_bias": {5: 200.0}}, ValueError, "logit_bias"),
    ({"logit_bias": {"5": 1.0}}, TypeError, "logit_bias"),
    ({"logprobs": -1}, ValueError, "logprobs"),
    ({"ignore_eos": 1}, TypeError, "ignore_eos"),
])
def test_sampling_params_validation(kwargs, exc, field):
    with pytest.raises(exc, match=field):
        SamplingParams(**kwargs)


def test_generate_arguments(llm):
    with pytest.raises(TypeError, match="prompts"):
        llm.generate(123)
    with pytest.raises(TypeError, match="prompt"):
        llm.generate([[]], use_tqdm=False)
    with pytest.raises(ValueError, match="sampling_params"):
        llm.generate(["a", "b"], [SamplingParams()] * 3, use_tqdm=False)
    with pytest.raises(TypeError, match="sampling_params"):
        llm.generate("a", {"temperature": 0}, use_tqdm=False)
    with pytest.raises(ValueError, match="logprobs"):  # above the engine's max_logprobs
        llm.generate("a", SamplingParams(logprobs=1000), use_tqdm=False)
    with pytest.raises(ValueError):  # out of the vocabulary
        llm.generate([[10**8]], use_tqdm=False)
    with pytest.raises(ValueError, match="max_model_len|context|maximum"):
        llm.generate("word " * 600, SamplingParams(max_tokens=4), use_tqdm=False)
    p = SamplingParams()
    p.temperature = -3.0  # changed after construction: checked again when used
    with pytest.raises(ValueError, match="temperature"):
        llm.generate("a", p, use_tqdm=False)


def test_engine_arguments():
    need_model()
    with pytest.raises(FileNotFoundError):
        LLM("/nonexistent/model.gguf")
    with pytest.raises(TypeError, match="max_num_seqs"):
        LLM(str(MODEL), max_num_seqs="4")
    with pytest.raises(ValueError, match="max_num_seqs"):
        LLM(str(MODEL), max_num_seqs=-1)
    with pytest.raises(ValueError, match="kv_cache_memory"):
        LLM(str(MODEL), kv_cache_memory="lots")
    with pytest.raises(ValueError, match="load_format"):
        LLM(str(MODEL), load_format="pt")
    with pytest.raises(ValueError, match="tool_call_parser"):
        LLM(str(MODEL), tool_call_parser="nope")
    with pytest.raises(ValueError, match="device|cuda"):
        LLM(str(MODEL), device="tpu")


def test_imports_without_gpu():
    """The package imports and runs on the CPU where no GPU is visible, and the interpreter
    exits promptly with an engine still running (the finalizer aborts and joins it)."""
    need_model()
    code = ("import inflight\n"
            f"llm = inflight.LLM({str(MODEL)!r}, device='auto', max_model_len=256, "
            "kv_cache_memory='64MiB')\n"
            "assert llm.device.startswith('cpu'), llm.device\n"
            "print(llm.generate('Hi', inflight.SamplingParams(temperature=0, max_tokens=2), "
            "use_tqdm=False)[0].outputs[0].token_ids)\n")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("[")
