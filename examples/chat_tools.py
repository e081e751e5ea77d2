#!/usr/bin/env python3
"""Chat with tools: the model's chat template shows it the tools, the hermes parser takes the
calls out of its answer, the script runs them and sends the results back.

    python examples/chat_tools.py --model Qwen2.5-1.5B-Instruct-Q4_K_M.gguf
(any model whose template writes <tool_call>{...}</tool_call> blocks: Qwen2.5/3, Hermes; the
default SmolLM2-135M rarely calls a tool.)
"""

import argparse
import json

from inflight import LLM, SamplingParams

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}]


def get_weather(city):
    return {"city": city, "temperature_c": 21, "sky": "clear"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    args = parser.parse_args()
    llm = LLM(args.model, tool_call_parser="hermes")
    params = SamplingParams(temperature=0.0, max_tokens=256)
    messages = [{"role": "user", "content": "What's the weather in Paris right now?"}]

    reply = llm.chat(messages, params, tools=TOOLS, use_tqdm=False)[0].outputs[0]
    if not reply.tool_calls:
        print("answer without a tool call:", reply.text)
        return
    messages.append({"role": "assistant", "content": reply.text, "tool_calls": [
        {"type": "function", "id": f"call_{i}",
         "function": {"name": c.name, "arguments": c.arguments}}
        for i, c in enumerate(reply.tool_calls)]})
    for i, call in enumerate(reply.tool_calls):
        result = get_weather(**json.loads(call.arguments))
        print(f"tool call: {call.name}({call.arguments}) -> {result}")
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": json.dumps(result)})
    final = llm.chat(messages, params, tools=TOOLS, use_tqdm=False)[0].outputs[0]
    print("answer:", final.text)


if __name__ == "__main__":
    main()
