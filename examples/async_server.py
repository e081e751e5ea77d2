#!/usr/bin/env python3
"""A streaming completion server in one file: Starlette (ASGI) + AsyncLLM, served by uvicorn.

    pip install starlette uvicorn
    python examples/async_server.py
    curl -N localhost:8000/generate -d '{"prompt": "Once upon a time", "max_tokens": 64}'

Each request streams its text as server-sent events; a client that disconnects cancels its
request (the generator is closed, which aborts it in the engine and frees its KV blocks).
"""

import json

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from inflight import AsyncLLM, SamplingParams

engine = AsyncLLM()


async def generate(request):
    body = await request.json()
    prompt = body.pop("prompt", "")
    try:
        params = SamplingParams(**body)
        stream = engine.generate(prompt, params)
        first = await stream.__anext__()  # bad prompts fail here, before the response starts
    except (TypeError, ValueError) as e:
        return JSONResponse({"error": str(e)}, status_code=400)

    async def events():
        out = first
        try:
            while True:
                c = out.outputs[0]
                yield f"data: {json.dumps({'text': c.text, 'finish_reason': c.finish_reason})}\n\n"
                if out.finished:
                    return
                out = await stream.__anext__()
        finally:
            await stream.aclose()  # a client that left: abort the request now

    return StreamingResponse(events(), media_type="text/event-stream")


async def stats(request):
    return JSONResponse(engine.stats())


app = Starlette(routes=[Route("/generate", generate, methods=["POST"]), Route("/stats", stats)])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=8000)
