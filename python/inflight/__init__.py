"""inflight: LLM inference with in-flight batching over a paged KV cache.

    from inflight import LLM, SamplingParams          # offline batches (vLLM's names)
    from inflight import AsyncLLM                     # asyncio servers, streaming

docs/python.md describes the API; the engine itself is C++ (include/inflight/).
"""

from .async_llm import AsyncLLM
from .engine_args import default_model
from .llm import LLM
from .outputs import (CompletionOutput, Logprob, RequestMetrics, RequestOutput, ToolCall, Usage)
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer

__all__ = [
    "AsyncLLM", "CompletionOutput", "LLM", "Logprob", "RequestMetrics", "RequestOutput",
    "SamplingParams", "Tokenizer", "ToolCall", "Usage", "default_model"
]
__version__ = "0.1.0"
