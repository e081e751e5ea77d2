"""What generation returns, with vLLM's names: RequestOutput holds one CompletionOutput per
choice, the prompt's token ids and the request's metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional


@dataclass
class Logprob:
    logprob: float
    rank: Optional[int] = None  # 1 = the most likely token; None when not among the top ones


@dataclass
class ToolCall:
    name: str
    arguments: str  # the arguments object as JSON text, as OpenAI sends it


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: List[int]
    # Per generated token: {token id: Logprob} for the chosen token and the top alternatives
    # (SamplingParams.logprobs); None when logprobs were not asked for.
    logprobs: Optional[List[Dict[int, Logprob]]] = None
    # "stop", "length", "abort", "error"; None while the choice is still running (streams).
    finish_reason: Optional[str] = None
    # The stop string that matched, or the stop token id (EOS or stop_token_ids).
    stop_reason: Optional[object] = None
    # LLM.chat with tools: the calls parsed out of the text (text then holds the rest).
    tool_calls: Optional[List[ToolCall]] = None
    error: Optional[str] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestMetrics:
    """Times on time.monotonic()'s clock (seconds), and what they add up to."""

    arrival_time: float = 0.0
    first_scheduled_time: float = 0.0
    first_token_time: float = 0.0
    last_token_time: float = 0.0
    finished_time: float = 0.0

    @property
    def time_in_queue(self) -> float:
        return _span(self.arrival_time, self.first_scheduled_time)

    @property
    def ttft(self) -> float:
        return _span(self.arrival_time, self.first_token_time)

    @property
    def e2e(self) -> float:
        return _span(self.arrival_time, self.finished_time)


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # prompt tokens whose KV came from the prefix cache


@dataclass
class RequestOutput:
    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    finished: bool
    usage: Optional[Usage] = None  # set once finished
    metrics: Optional[RequestMetrics] = None  # set once finished
    num_cached_tokens: int = 0


def _span(start: float, end: float) -> float:
    return end - start if start and end else 0.0


def make_logprobs(core_logprobs) -> Optional[List[Dict[int, Logprob]]]:
    out = []
    for lp in core_logprobs:
        entry = {}
        for rank, (token, value) in enumerate(lp.top, start=1):
            entry[token] = Logprob(value, rank)
        if lp.token_id not in entry:
            entry[lp.token_id] = Logprob(lp.logprob, None)
        out.append(entry)
    return out


def make_usage(core_usage) -> Usage:
    return Usage(core_usage.prompt_tokens, core_usage.completion_tokens,
                 core_usage.cached_prompt_tokens)


def make_metrics(t) -> RequestMetrics:
    return RequestMetrics(t.arrival, t.first_scheduled, t.first_token, t.last_token, t.finished)


def stop_reason(choice):
    if choice.stop_string:
        return choice.stop_string
    return choice.stop_token_id
