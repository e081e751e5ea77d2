"""Fixtures of the Python package tests (tests/python/package_env.py has the settings)."""

import pytest

from package_env import LIMITS, MODEL, Server, need_model


@pytest.fixture(scope="session")
def llm():
    need_model()
    from inflight import LLM
    engine = LLM(str(MODEL), tool_call_parser="hermes", **LIMITS)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="session")
def async_llm():
    need_model()
    from inflight import AsyncLLM
    engine = AsyncLLM(str(MODEL), **LIMITS)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.stop()
