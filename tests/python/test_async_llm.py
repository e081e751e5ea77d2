"""AsyncLLM: many concurrent streams from one event loop, abort, cancellation by the task."""

import asyncio

import pytest

from inflight import SamplingParams


async def collect(engine, prompt, params, request_id=None):
    text, ids, last = "", [], None
    async for out in engine.generate(prompt, params, request_id):
        text += out.outputs[0].text
        ids += out.outputs[0].token_ids
        last = out
    return text, ids, last


async def wait_all_blocks_free(engine, timeout=30.0):
    """Blocks are freed at the engine's next step; poll the gauge until they are."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        s = engine.stats()
        if s["num_free_kv_blocks"] == s["num_kv_blocks"] and s["num_running"] == 0:
            return s
        assert asyncio.get_running_loop().time() < deadline, s
        await asyncio.sleep(0.05)


def test_200_concurrent_streams(async_llm, llm):
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    prompts = [[1 + i % 50, 200 + i, 300 + i % 7] for i in range(200)]

    async def main():
        return await asyncio.gather(*(collect(async_llm, p, params, f"r{i}")
                                      for i, p in enumerate(prompts)))

    results = asyncio.run(main())
    assert len(results) == 200
    for text, ids, last in results:
        assert len(ids) == 4 and last.finished
        assert last.outputs[0].finish_reason == "length"
        assert last.usage.completion_tokens == 4
    # The deltas add up to what the offline API returns for the same prompts.
    offline = llm.generate(prompts[:5], params, use_tqdm=False)
    for (text, ids, _), out in zip(results[:5], offline):
        assert ids == out.outputs[0].token_ids and text == out.outputs[0].text


def test_abort_frees_kv_blocks(async_llm):
    params = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)

    async def main():
        await wait_all_blocks_free(async_llm)
        gen = async_llm.generate("Tell me a very long story.", params, "long")
        first = await gen.__anext__()
        assert not first.finished
        assert async_llm.stats()["num_free_kv_blocks"] < async_llm.stats()["num_kv_blocks"]
        await async_llm.abort("long")
        last = first
        async for out in gen:
            last = out
        assert last.finished and last.outputs[0].finish_reason == "abort"
        assert last.usage.completion_tokens < 400
        await wait_all_blocks_free(async_llm)

    asyncio.run(main())


def test_cancelled_task_cancels_request(async_llm):
    params = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)

    async def main():
        await wait_all_blocks_free(async_llm)
        aborted_before = async_llm.stats()["num_requests_aborted"]
        started = asyncio.Event()

        async def consume():
            async for _ in async_llm.generate("Count to a thousand:", params, "cancel-me"):
                started.set()

        task = asyncio.create_task(consume())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        s = await wait_all_blocks_free(async_llm)
        assert s["num_requests_aborted"] == aborted_before + 1

    asyncio.run(main())


def test_duplicate_request_id_and_bad_params(async_llm):
    async def main():
        gen = async_llm.generate("Hi", SamplingParams(max_tokens=50, ignore_eos=True), "dup")
        await gen.__anext__()
        with pytest.raises(ValueError, match="already running"):
            await async_llm.generate("Hi", SamplingParams(), "dup").__anext__()
        await gen.aclose()
        with pytest.raises(TypeError, match="sampling_params"):
            await async_llm.generate("Hi", {"temperature": 0}).__anext__()
        with pytest.raises(ValueError, match="vocabulary|token"):
            await async_llm.generate([10**8], SamplingParams()).__anext__()

    asyncio.run(main())


def test_chat_stream_equals_offline_chat(async_llm, llm):
    messages = [{"role": "user", "content": "Name three colours."}]
    params = SamplingParams(temperature=0, max_tokens=16)

    async def main():
        text = ""
        async for out in async_llm.chat(messages, params):
            text += out.outputs[0].text
        return text

    assert asyncio.run(main()) == llm.chat(messages, params, use_tqdm=False)[0].outputs[0].text
