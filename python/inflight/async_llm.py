"""AsyncLLM: the engine for asyncio servers.

    engine = AsyncLLM()
    async for out in engine.generate("Hello", SamplingParams(max_tokens=32), "req-1"):
        print(out.outputs[0].text, end="")          # deltas: the text of this step

Each yielded RequestOutput holds what one step produced (outputs[0].text and .token_ids are
deltas, as vLLM's RequestOutputKind.DELTA); the last has finished=True, finish_reason, usage and
metrics. Many requests stream concurrently from one event loop.

How outputs reach the loop: the engine thread never takes the GIL. Each time it queues outputs
of a request it records the request in a ready queue and, when the queue was empty, makes an
eventfd readable; the loop watches that fd (loop.add_reader) and its callback drains every ready
stream at once and wakes the generators waiting on them. No polling, no thread hop per token.

Cancellation: abort(request_id), or cancelling the task that iterates the generator (or
closing the generator early), cancels the request: it frees its KV blocks at the next step.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import AsyncIterator, Dict, List, Optional

from .engine_args import register_shutdown, start_engine
from .llm import chat_prompt, normalize_prompts
from .outputs import (CompletionOutput, RequestOutput, make_logprobs, make_metrics, make_usage,
                      stop_reason)
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer


class _Stream:
    __slots__ = ("items", "waiter")

    def __init__(self):
        self.items: List = []  # StreamOutputs drained, not yet yielded
        self.waiter: Optional[asyncio.Future] = None  # set while the generator waits


class AsyncLLM:
    """Keyword arguments as LLM's (inflight.engine_args.start_engine). Bound to the event loop
    of its first generate() call."""

    def __init__(self, model: Optional[str] = None, **kwargs):
        self._core = start_engine(model, **kwargs)
        self._finalizer = register_shutdown(self, self._core)
        self._tokenizer = Tokenizer(self._core) if self._core.has_tokenizer else None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._streams: Dict[int, _Stream] = {}  # engine request id -> its stream
        self._ids: Dict[str, int] = {}  # request_id -> engine request id

    def _attach(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            if self._loop is not None and not self._loop.is_closed() and self._streams:
                raise RuntimeError("AsyncLLM: requests are running on another event loop")
            self._loop = loop
            loop.add_reader(self._core.ready_fd, self._on_ready)
        return loop

    def _on_ready(self) -> None:
        streams = self._streams
        for out in self._core.drain():
            stream = streams.get(out.id)
            if stream is None:
                continue
            stream.items.append(out)
            waiter = stream.waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def generate(self, prompt, sampling_params: Optional[SamplingParams] = None,
                       request_id: Optional[str] = None, *, priority: int = 0,
                       add_special_tokens: bool = True) -> AsyncIterator[RequestOutput]:
        """Streams one request's outputs (deltas). `prompt`: text, token ids, or a dict with
        'prompt' / 'prompt_token_ids'. `request_id` (any str; default a fresh uuid) names the
        request for abort(). Bad arguments raise ValueError/TypeError before anything is
        yielded."""
        loop = self._attach()
        if sampling_params is None:
            sampling_params = SamplingParams()
        if not isinstance(sampling_params, SamplingParams):
            raise TypeError("sampling_params: expected SamplingParams, got "
                            f"{type(sampling_params).__name__}")
        prompts = normalize_prompts(prompt)
        if len(prompts) != 1:
            raise ValueError(f"prompt: AsyncLLM.generate takes one prompt, got {len(prompts)}")
        if request_id is None:
            request_id = uuid.uuid4().hex
        elif not isinstance(request_id, str):
            raise TypeError(f"request_id: expected str, got {type(request_id).__name__}")
        if request_id in self._ids:
            raise ValueError(f"request_id {request_id!r} is already running")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"priority: expected int, got {type(priority).__name__}")

        engine_id, prompt_token_ids = self._core.submit(prompts[0], sampling_params._to_core(),
                                                        add_special_tokens, priority)
        stream = _Stream()
        self._streams[engine_id] = stream
        self._ids[request_id] = engine_id
        text_prompt = prompts[0] if isinstance(prompts[0], str) else None
        finished = False
        try:
            while not finished:
                if not stream.items:
                    stream.waiter = loop.create_future()
                    try:
                        await stream.waiter
                    finally:
                        stream.waiter = None
                items, stream.items = stream.items, []
                for out in items:
                    finished = out.request_finished
                    yield _delta(request_id, text_prompt, prompt_token_ids, out)
        finally:
            del self._streams[engine_id]
            del self._ids[request_id]
            if not finished:
                self._core.cancel(engine_id)

    async def chat(self, messages, sampling_params: Optional[SamplingParams] = None,
                   request_id: Optional[str] = None, *, tools: Optional[List[dict]] = None,
                   chat_template_kwargs: Optional[dict] = None,
                   add_generation_prompt: bool = True,
                   continue_final_message: bool = False) -> AsyncIterator[RequestOutput]:
        """One conversation, its prompt built as LLM.chat builds it (the server's chat prompt),
        streamed as generate() streams (tool calls are left in the text)."""
        ids, _ = chat_prompt(self._core, messages, tools, chat_template_kwargs,
                             add_generation_prompt, continue_final_message)
        async for out in self.generate(ids, sampling_params, request_id):
            yield out

    async def abort(self, request_id: str) -> None:
        """Cancels a running request (its generator ends with finish_reason "abort"); a request
        that is not running is ignored."""
        engine_id = self._ids.get(request_id)
        if engine_id is not None:
            self._core.cancel(engine_id)

    def stats(self) -> dict:
        """The engine's counters and gauges (include/inflight/stats.h)."""
        return self._core.stats()

    def get_tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            raise ValueError("the model has no tokenizer (dummy weights): pass tokenizer=PATH")
        return self._tokenizer

    @property
    def config(self):
        return self._core.config

    def shutdown(self) -> None:
        """Aborts every running request and stops the engine thread (also done at exit)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._core.ready_fd)
        self._loop = None
        self._finalizer()


def _delta(request_id: str, prompt, prompt_token_ids, out) -> RequestOutput:
    choice = CompletionOutput(index=out.index,
                              text=out.text,
                              token_ids=out.token_ids,
                              logprobs=make_logprobs(out.logprobs) if out.logprobs else None,
                              finish_reason=out.finish_reason,
                              stop_reason=stop_reason(out) if out.finish_reason else None,
                              error=out.error or None)
    if not out.request_finished:
        return RequestOutput(request_id, prompt, prompt_token_ids, [choice], False)
    usage = make_usage(out.usage)
    return RequestOutput(request_id, prompt, prompt_token_ids, [choice], True, usage,
                         make_metrics(out.timings), usage.cached_prompt_tokens)
