"""SamplingParams: how one request samples and when it stops (include/inflight/sampling_params.h).

Every field of the engine's SamplingParams, with vLLM's names and defaults where vLLM has the
field. Arguments are checked when the object is made: a wrong type raises TypeError, a value out
of range raises ValueError, each naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Dict, List, Optional, Union

from . import _inflight

_INT32_MAX = 2**31 - 1


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class SamplingParams:
    # Choices generated for the prompt (they share its KV blocks). >= 1.
    n: int = 1
    # 0 = greedy (argmax); otherwise logits are divided by it. >= 0.
    temperature: float = 1.0
    # Keep the k most likely tokens; 0 or -1 = all.
    top_k: int = 0
    # Nucleus sampling: the smallest set of tokens whose probability reaches top_p. (0, 1].
    top_p: float = 1.0
    # Drop tokens less likely than min_p times the most likely one. [0, 1].
    min_p: float = 0.0
    # HF-style penalty on tokens seen in the prompt or output. > 0; 1 = off.
    repetition_penalty: float = 1.0
    # OpenAI penalties on output tokens. [-2, 2].
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    # {token id: bias in [-100, 100]} added to the logits.
    logit_bias: Optional[Dict[int, float]] = None
    # Same seed + same prompt = same output, whatever else runs. None: a random seed.
    seed: Optional[int] = None
    # Most tokens generated per choice (vLLM's default, 16); None = up to the context length.
    max_tokens: Optional[int] = 16
    # EOS and stop token ids are suppressed until this many tokens were generated.
    min_tokens: int = 0
    # Keep generating past EOS (stop_token_ids still apply).
    ignore_eos: bool = False
    # Generation stops after any of these tokens (the token is part of the output).
    stop_token_ids: Optional[List[int]] = None
    # Generation stops when the text contains one of these; it is trimmed unless
    # include_stop_str_in_output.
    stop: Optional[Union[str, List[str]]] = None
    include_stop_str_in_output: bool = False
    # Log-probability of each generated token plus this many alternatives; None = none.
    logprobs: Optional[int] = None
    # Leave special tokens out of the output text.
    skip_special_tokens: bool = True

    _core: Optional[object] = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check_types()
        self._check_ranges()

    def __setattr__(self, name, value) -> None:
        # A changed field invalidates the converted parameters.
        object.__setattr__(self, name, value)
        if name != "_core":
            object.__setattr__(self, "_core", None)

    @classmethod
    def greedy(cls, **kwargs) -> "SamplingParams":
        return cls(temperature=0.0, **kwargs)

    def _check_types(self) -> None:
        def want(name, ok, what):
            value = getattr(self, name)
            if not ok(value):
                raise TypeError(f"SamplingParams.{name}: expected {what}, got "
                                f"{type(value).__name__} {value!r}")

        for name in ("n", "top_k", "min_tokens"):
            want(name, _is_int, "int")
        for name in ("temperature", "top_p", "min_p", "repetition_penalty",
                     "frequency_penalty", "presence_penalty"):
            want(name, _is_number, "a number")
        for name in ("ignore_eos", "include_stop_str_in_output", "skip_special_tokens"):
            want(name, lambda v: isinstance(v, bool), "bool")
        for name in ("seed", "max_tokens", "logprobs"):
            want(name, lambda v: v is None or _is_int(v), "int or None")
        want("logit_bias", lambda v: v is None or (
            isinstance(v, dict) and all(_is_int(k) and _is_number(b) for k, b in v.items())),
            "a dict of int token id -> number, or None")
        want("stop_token_ids", lambda v: v is None or (
            isinstance(v, (list, tuple)) and all(_is_int(t) for t in v)),
            "a list of int, or None")
        want("stop", lambda v: v is None or isinstance(v, str) or (
            isinstance(v, (list, tuple)) and all(isinstance(s, str) for s in v)),
            "a str, a list of str, or None")

    def _check_ranges(self) -> None:
        def bad(name, rule):
            raise ValueError(f"SamplingParams.{name} must be {rule}, got {getattr(self, name)!r}")

        if not 1 <= self.n <= _INT32_MAX:
            bad("n", ">= 1")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            bad("temperature", "a finite number >= 0")
        if not -1 <= self.top_k <= _INT32_MAX:
            bad("top_k", "-1, 0 (all) or >= 1")
        if not 0 < self.top_p <= 1:
            bad("top_p", "in (0, 1]")
        if not 0 <= self.min_p <= 1:
            bad("min_p", "in [0, 1]")
        if not (math.isfinite(self.repetition_penalty) and self.repetition_penalty > 0):
            bad("repetition_penalty", "a finite number > 0")
        if not -2 <= self.frequency_penalty <= 2:
            bad("frequency_penalty", "in [-2, 2]")
        if not -2 <= self.presence_penalty <= 2:
            bad("presence_penalty", "in [-2, 2]")
        if self.seed is not None and not 0 <= self.seed < 2**64:
            bad("seed", "in [0, 2**64)")
        if self.max_tokens is not None and not 1 <= self.max_tokens <= _INT32_MAX:
            bad("max_tokens", ">= 1 or None")
        if not 0 <= self.min_tokens <= _INT32_MAX:
            bad("min_tokens", ">= 0")
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValueError(f"SamplingParams.min_tokens ({self.min_tokens}) must not exceed "
                             f"max_tokens ({self.max_tokens})")
        if self.logprobs is not None and not 0 <= self.logprobs <= _INT32_MAX:
            bad("logprobs", ">= 0 or None")
        for token, b in (self.logit_bias or {}).items():
            if not 0 <= token <= _INT32_MAX:
                raise ValueError(f"SamplingParams.logit_bias: token id must be >= 0, got {token}")
            if not -100 <= b <= 100:
                raise ValueError(f"SamplingParams.logit_bias of token {token} must be in "
                                 f"[-100, 100], got {b}")
        for token in self.stop_token_ids or ():
            if not 0 <= token <= _INT32_MAX:
                raise ValueError(f"SamplingParams.stop_token_ids: token id must be >= 0, "
                                 f"got {token}")
        stops = [self.stop] if isinstance(self.stop, str) else (self.stop or [])
        if any(s == "" for s in stops):
            raise ValueError("SamplingParams.stop: stop strings must not be empty")

    def _to_core(self):
        """The engine's SamplingParams (made once per object, again after a field changes)."""
        if self._core is not None:
            return self._core
        self._check_types()
        self._check_ranges()
        core = _inflight.CoreSamplingParams()
        for f in fields(self):
            if f.name == "_core":
                continue
            value = getattr(self, f.name)
            if f.name == "logit_bias":
                value = sorted((self.logit_bias or {}).items())
            elif f.name == "stop_token_ids":
                value = list(value or ())
            elif f.name == "stop":
                value = [value] if isinstance(value, str) else list(value or ())
            setattr(core, f.name, value)
        object.__setattr__(self, "_core", core)
        return core
