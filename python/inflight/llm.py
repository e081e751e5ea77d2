"""LLM: offline batch generation, as vLLM's and TensorRT-LLM's LLM classes do it.

    from inflight import LLM, SamplingParams
    llm = LLM()                                   # the default model, on a GPU when there is one
    for out in llm.generate(["Hello, my name is"], SamplingParams(temperature=0, max_tokens=32)):
        print(out.outputs[0].text)

Every prompt of a call is queued at once and runs with in-flight batching; the call waits with
the GIL released. Ctrl-C cancels what is still running and raises KeyboardInterrupt.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _inflight
from .engine_args import register_shutdown, start_engine
from .outputs import (CompletionOutput, RequestOutput, ToolCall, make_logprobs, make_metrics,
                      make_usage, stop_reason)
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer

PromptType = Union[str, Sequence[int], Dict[str, Any]]
# The tool-call formats chat() parses (the server's --tool-call-parser names).
TOOL_CALL_PARSERS = _inflight.tool_call_parsers


def normalize_prompts(prompts) -> List[Union[str, List[int]]]:
    """str | token ids | {"prompt": str} | {"prompt_token_ids": [...]}, or a list of them."""
    if isinstance(prompts, (str, dict)):
        prompts = [prompts]
    elif isinstance(prompts, (list, tuple)) and prompts and all(
            isinstance(t, int) and not isinstance(t, bool) for t in prompts):
        prompts = [list(prompts)]
    if not isinstance(prompts, (list, tuple)):
        raise TypeError(f"prompts: expected a str, a list of token ids, or a list of those, got "
                        f"{type(prompts).__name__}")
    out = []
    for i, p in enumerate(prompts):
        if isinstance(p, dict):
            if "prompt_token_ids" in p:
                p = p["prompt_token_ids"]
            elif "prompt" in p:
                p = p["prompt"]
            else:
                raise ValueError(f"prompts[{i}]: a dict prompt needs 'prompt' or "
                                 "'prompt_token_ids'")
        if isinstance(p, str):
            out.append(p)
        elif isinstance(p, (list, tuple)):
            out.append(list(p))
        else:
            raise TypeError(f"prompts[{i}]: expected a str or a list of token ids, got "
                            f"{type(p).__name__}")
    return out


def chat_prompt(core, messages, tools, chat_template_kwargs, add_generation_prompt,
                continue_final_message):
    """(prompt token ids, whether to parse tool calls) of one conversation, built and checked by
    the server's code (the body of a chat completion request)."""
    body: Dict[str, Any] = {"messages": list(messages),
                            "add_generation_prompt": add_generation_prompt,
                            "continue_final_message": continue_final_message}
    if tools is not None:
        body["tools"] = tools
    if chat_template_kwargs is not None:
        body["chat_template_kwargs"] = chat_template_kwargs
    return core.chat_prompt(json.dumps(body))


def core_params(params, count: int) -> list:
    if params is None:
        params = SamplingParams()
    if isinstance(params, SamplingParams):
        return [params._to_core()]
    if isinstance(params, (list, tuple)):
        if len(params) != count:
            raise ValueError(f"sampling_params: {len(params)} given for {count} prompts (give "
                             "one, or one per prompt)")
        for i, p in enumerate(params):
            if not isinstance(p, SamplingParams):
                raise TypeError(f"sampling_params[{i}]: expected SamplingParams, got "
                                f"{type(p).__name__}")
        return [p._to_core() for p in params]
    raise TypeError("sampling_params: expected SamplingParams or a list of them, got "
                    f"{type(params).__name__}")


def completion_output(index: int, choice) -> CompletionOutput:
    return CompletionOutput(index=index,
                            text=choice.text,
                            token_ids=choice.token_ids,
                            logprobs=make_logprobs(choice.logprobs) if choice.logprobs else None,
                            finish_reason=choice.finish_reason,
                            stop_reason=stop_reason(choice),
                            error=choice.error or None)


def request_output(prompt, completion) -> RequestOutput:
    usage = make_usage(completion.usage)
    return RequestOutput(request_id=str(completion.id),
                         prompt=prompt if isinstance(prompt, str) else None,
                         prompt_token_ids=completion.prompt_token_ids,
                         outputs=[completion_output(i, c) for i, c in
                                  enumerate(completion.choices)],
                         finished=True,
                         usage=usage,
                         metrics=make_metrics(completion.timings),
                         num_cached_tokens=usage.cached_prompt_tokens)


class _Progress:
    """tqdm over finished requests, when tqdm is installed and asked for."""

    def __init__(self, enabled: bool, total: int, desc: str):
        self.bar = None
        if enabled and total > 1:
            try:
                from tqdm.auto import tqdm
                self.bar = tqdm(total=total, desc=desc, unit="req", dynamic_ncols=True)
            except ImportError:
                pass

    def callback(self):
        return self.bar.update if self.bar is not None else None

    def close(self):
        if self.bar is not None:
            self.bar.close()


class LLM:
    """An engine for offline generation. Keyword arguments: see inflight.engine_args.start_engine
    (model, tokenizer, load_format, device, max_num_seqs, max_num_batched_tokens, max_model_len,
    block_size, kv_cache_memory, enable_prefix_caching, max_logprobs, quantization,
    kv_cache_dtype, tensor_parallel_size, chat_template, seed); `tool_call_parser` (vLLM's
    names: TOOL_CALL_PARSERS) makes chat() with tools return parsed tool calls."""

    def __init__(self, model: Optional[str] = None, *, tool_call_parser: Optional[str] = None,
                 **kwargs):
        if tool_call_parser is not None and tool_call_parser not in TOOL_CALL_PARSERS:
            raise ValueError("tool_call_parser must be one of " + ", ".join(TOOL_CALL_PARSERS) +
                             f" or None, got {tool_call_parser!r}")
        self.tool_call_parser = tool_call_parser
        self._core = start_engine(model, **kwargs)
        self._finalizer = register_shutdown(self, self._core)
        self._tokenizer = Tokenizer(self._core) if self._core.has_tokenizer else None

    # ---- generation ---------------------------------------------------------------------------
    def generate(self, prompts, sampling_params=None, use_tqdm: bool = True, *,
                 add_special_tokens: bool = True) -> List[RequestOutput]:
        """Runs every prompt to the end; outputs in prompt order. `sampling_params`: one for
        all prompts or one per prompt (default: SamplingParams())."""
        prompts = normalize_prompts(prompts)
        params = core_params(sampling_params, len(prompts))
        if not prompts:
            return []
        progress = _Progress(use_tqdm, len(prompts), "Generating")
        try:
            completions = self._core.generate(prompts, params, add_special_tokens,
                                              progress.callback())
        finally:
            progress.close()
        return [request_output(p, c) for p, c in zip(prompts, completions)]

    def chat(self, messages, sampling_params=None, use_tqdm: bool = True, *,
             tools: Optional[List[dict]] = None,
             chat_template_kwargs: Optional[dict] = None,
             add_generation_prompt: bool = True,
             continue_final_message: bool = False) -> List[RequestOutput]:
        """One conversation (a list of {"role", "content"} messages) or a list of them, rendered
        with the model's chat template exactly as the server's /v1/chat/completions does (tools
        passed to the template). With tools and a tool_call_parser, each output's tool_calls
        holds the parsed calls and text the rest."""
        if isinstance(messages, (list, tuple)) and messages and isinstance(messages[0], dict):
            conversations = [messages]
        elif isinstance(messages, (list, tuple)) and all(
                isinstance(c, (list, tuple)) for c in messages):
            conversations = list(messages)
        else:
            raise TypeError("messages: expected a list of message dicts or a list of such lists")
        prompts, parse = [], []
        for conversation in conversations:
            ids, parse_tools = chat_prompt(self._core, conversation, tools, chat_template_kwargs,
                                           add_generation_prompt, continue_final_message)
            prompts.append(ids)
            parse.append(parse_tools and self.tool_call_parser is not None)
        outputs = self.generate(prompts, sampling_params, use_tqdm)
        for out, parse_tools in zip(outputs, parse):
            if parse_tools:
                for c in out.outputs:
                    content, calls = _inflight.parse_tool_calls(self.tool_call_parser, c.text,
                                                                json.dumps(tools))
                    if calls:
                        c.text = content
                        c.tool_calls = [ToolCall(name, args) for name, args in calls]
        return outputs

    # ---- the engine ---------------------------------------------------------------------------
    def get_tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            raise ValueError("the model has no tokenizer (dummy weights): pass tokenizer=PATH")
        return self._tokenizer

    def stats(self) -> dict:
        """The engine's counters and gauges (include/inflight/stats.h)."""
        return self._core.stats()

    @property
    def config(self):
        """The engine's effective limits (max_num_seqs, max_model_len, ... after defaults)."""
        return self._core.config

    @property
    def device(self) -> str:
        return self._core.device_name

    def shutdown(self) -> None:
        """Aborts what runs and stops the engine thread (also done at exit). Idempotent."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
