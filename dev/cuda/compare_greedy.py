"""Compares the greedy continuations of two `inflight generate --prompts-file` runs (JSONL, one
result per request, with "logprobs" of each token): the tokens must be the same, except where
the reference's two best candidates tie at bf16 precision; from such a tie on the runs may
follow different but equally valid paths. Prints one line per request and exits 1 on a real
mismatch.

    python3 compare_greedy.py reference.jsonl other.jsonl [tie_margin]
"""
import json
import sys

TIE = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05  # logprob gap of a bf16 tie


def main():
    ref = [json.loads(l) for l in open(sys.argv[1])]
    got = [json.loads(l) for l in open(sys.argv[2])]
    bad = 0
    for i, (a, b) in enumerate(zip(ref, got)):
        ta, tb = a["token_ids"], b["token_ids"]
        n = next((k for k, (x, y) in enumerate(zip(ta, tb)) if x != y), None)
        if n is None and len(ta) == len(tb):
            print(f"request {i}: {len(ta)} tokens identical")
            continue
        if n is None:
            print(f"request {i}: lengths differ ({len(ta)} vs {len(tb)})")
            bad += 1
            continue
        top = dict((t, lp) for t, lp in a["logprobs"][n]["top"])
        gap = top[ta[n]] - top.get(tb[n], float("-inf"))
        verdict = "tie at bf16 precision" if gap <= TIE else "MISMATCH"
        bad += verdict == "MISMATCH"
        print(f"request {i}: identical for {n} tokens, then {ta[n]} vs {tb[n]} "
              f"(reference logprob gap {gap:.4f}): {verdict}")
    sys.exit(1 if bad else 0)


main()
