#!/usr/bin/env python3
"""Offline batch generation: every prompt queued at once, in-flight batching does the rest.

    python examples/offline_batch.py                      # the default model
    python examples/offline_batch.py --model model.gguf --max-tokens 64
"""

import argparse

from inflight import LLM, SamplingParams

PROMPTS = [
    "The capital of France is",
    "Write a haiku about the sea:",
    "def quicksort(xs):",
    "The three laws of thermodynamics are",
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", help="a .gguf file or Hugging Face directory")
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args()

    llm = LLM(args.model)
    greedy = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)
    sampled = SamplingParams(temperature=0.8, top_p=0.95, seed=7, max_tokens=args.max_tokens)
    outputs = llm.generate(PROMPTS, [greedy, sampled, greedy, sampled])
    for out in outputs:
        c = out.outputs[0]
        print(f"--- {out.prompt!r} ({len(c.token_ids)} tokens, {c.finish_reason}, "
              f"TTFT {out.metrics.ttft * 1e3:.0f} ms)")
        print(out.prompt + c.text)
    print(llm.stats()["num_generation_tokens"], "tokens generated")


if __name__ == "__main__":
    main()
