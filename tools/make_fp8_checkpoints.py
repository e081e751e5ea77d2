#!/usr/bin/env python3
"""Writes tiny FP8 checkpoints of one random Llama, one directory per layout that inflight reads
(src/formats/quantization.h, src/formats/weight_scales.h):

  ct-fp8-dynamic/  compressed-tensors FP8_DYNAMIC: weight_scale per output channel [N, 1],
                   activations dynamic per token.
  ct-fp8-static/   compressed-tensors FP8: one weight_scale [1] per tensor, static input_scale
                   [1], kv_cache_scheme with self_attn.k_scale / v_scale (added after the
                   package's save: see add_kv_cache_scheme).
  fp8-block/       transformers' native FP8 (quant_method "fp8", DeepSeek-V3 / Qwen3-FP8 style):
                   weight_block_size [128, 128], weight_scale_inv [ceil(N/128), ceil(K/128)] in
                   f32, dynamic activations. intermediate_size 576 leaves half blocks.
  modelopt/        NVIDIA ModelOpt: hf_quant_config.json (quant_algo FP8, kv_cache_quant_algo
                   FP8, exclude_modules [lm_head]), scalar f32 weight_scale and input_scale,
                   self_attn.k_proj.k_scale / self_attn.v_proj.v_scale; no quantization_config
                   in config.json (the older export, which the loader must find on its own).

How they are written: the two compressed-tensors layouts through the `compressed-tensors`
package's own classes (QuantizationConfig + apply_quantization_config attach the scale
parameters, ModelCompressor compresses the weights and writes config.json's
quantization_config), with our scales put in before compressing; it runs on the CPU. The other
two are written by hand with `safetensors` + torch.float8_e4m3fn in the layouts those tools
document. The lm_head and embeddings stay bf16 everywhere.

Quantisation: weight scale = amax / 448 over the tensor, each row, or each 128x128 block;
weights = clamp(w / scale, -448, 448) cast to float8_e4m3fn (round to nearest even). Static
activation scales = amax / 448 of each linear layer's input, and KV scales amax / 448 of the
k_proj / v_proj outputs (before RoPE: close enough for a fixture), over a random calibration
batch.

Each directory also gets tokenizer.json: a byte-level BPE trained here on a few sentences (the
model's vocab_size is its size), so `inflight generate --model DIR` runs without other files;
and reference.json: 6 greedy tokens after each of 4 prompts from fp32 transformers on the
dequantised weights, with activations unquantized and with them rounded to e4m3 as the layout scales them
(per token, per token and 128 columns, or the static input_scale), and each step's margin.

Usage (needs torch, transformers, safetensors, tokenizers and compressed-tensors; none is in
scripts/requirements.txt, so install them into a scratch venv):
    python3 tools/make_fp8_checkpoints.py OUT_DIR [--layouts ct-fp8-dynamic,...] [--check]
--check reads every directory back and checks each dequantised weight against the bf16 original
to e4m3's rounding error. tests/model/test_fp8_checkpoints.py runs it; nothing is committed.
"""
import argparse
import json
import math
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM

E4M3_MAX = 448.0
BLOCK = 128
LAYOUTS = ["ct-fp8-dynamic", "ct-fp8-static", "fp8-block", "modelopt"]
LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
TEXT = [
    "The quick brown fox jumps over the lazy dog.",
    "FP8 checkpoints store weights as e4m3 bytes with a scale per tensor, row or block.",
    "Hello, world! How are you today? I am fine, thank you.",
    "In-flight batching lets new requests join the running batch at the next step.",
    "0123456789 + - * / = ( ) [ ] { } < > ' \" , . ; : ! ?",
]


def make_tokenizer(vocab_size):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXT * 4, trainer)
    return tok


def make_model(seed, vocab_size):
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=256, intermediate_size=576,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, rope_theta=10000.0, bos_token_id=0,
                         eos_token_id=0, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # weights of realistic spread: the default init is 0.02 everywhere
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.mul_(torch.exp(torch.randn(p.shape[0], 1) * 0.5))
    return model.to(torch.bfloat16)


@torch.no_grad()
def calibrate(model, seed):
    """amax of each linear layer's input, and of the k_proj / v_proj outputs, on random ids."""
    gen = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, model.config.vocab_size, (4, 48), generator=gen)
    inputs, outputs, hooks = {}, {}, []
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and name != "lm_head":
            def hook(m, args, out, name=name):
                inputs[name] = max(inputs.get(name, 0.0), args[0].abs().max().item())
                outputs[name] = max(outputs.get(name, 0.0), out.abs().max().item())
            hooks.append(mod.register_forward_hook(hook))
    model(ids)
    for h in hooks:
        h.remove()
    return inputs, outputs


def scale_of(amax):
    return torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))


def to_e4m3(x):
    return x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def quantize(w, granularity):
    """(e4m3 weight, f32 scale) for a [N, K] weight: scale [] per tensor, [N, 1] per channel,
    [ceil(N/128), ceil(K/128)] per block."""
    w = w.float()
    if granularity == "tensor":
        s = scale_of(w.abs().max())
        return to_e4m3(w / s), s
    if granularity == "channel":
        s = scale_of(w.abs().amax(dim=1, keepdim=True))
        return to_e4m3(w / s), s
    n, k = w.shape
    gr, gc = math.ceil(n / BLOCK), math.ceil(k / BLOCK)
    padded = torch.zeros(gr * BLOCK, gc * BLOCK)
    padded[:n, :k] = w
    blocks = padded.view(gr, BLOCK, gc, BLOCK)
    s = scale_of(blocks.abs().amax(dim=(1, 3)))
    q = to_e4m3(blocks / s[:, None, :, None]).view(gr * BLOCK, gc * BLOCK)[:n, :k]
    return q.contiguous(), s


def dequantize(q, s, block):
    """q * s, with s broadcast per tensor, row or block (block: [rows, cols] or None)."""
    x = q.float()
    s = s.float()
    if block is None:
        return x * (s if s.dim() == 2 else s.reshape(()))
    n, k = x.shape
    s = s.repeat_interleave(block[0], dim=0)[:n].repeat_interleave(block[1], dim=1)[:, :k]
    return x * s


def save_common(model, tok, out):
    os.makedirs(out, exist_ok=True)
    model.config.save_pretrained(out)
    tok.save(os.path.join(out, "tokenizer.json"))


def patch_config(out, **keys):
    path = os.path.join(out, "config.json")
    with open(path) as f:
        config = json.load(f)
    config.update(keys)
    with open(path, "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)


def write_compressed_tensors(model, tok, out, static, calibration):
    """compressed-tensors FP8_DYNAMIC (static=False) or FP8 with a KV-cache scheme (True)."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (QuantizationArgs, QuantizationConfig,
                                                 apply_quantization_config,
                                                 preset_name_to_scheme)
    scheme = preset_name_to_scheme("FP8" if static else "FP8_DYNAMIC", ["Linear"])
    kv = QuantizationArgs(num_bits=8, type="float", strategy="tensor", dynamic=False,
                          symmetric=True) if static else None
    config = QuantizationConfig(config_groups={"group_0": scheme}, ignore=["lm_head"],
                                kv_cache_scheme=kv)
    apply_quantization_config(model, config)
    inputs, outputs = calibration
    with torch.no_grad():
        for name, mod in model.named_modules():
            if hasattr(mod, "weight_scale") and name != "lm_head":
                _, s = quantize(mod.weight, "tensor" if static else "channel")
                mod.weight_scale.copy_(s.reshape(mod.weight_scale.shape))
                if static:
                    mod.input_scale.fill_(inputs[name] / E4M3_MAX)
            if static and hasattr(mod, "k_scale"):
                mod.k_scale.fill_(outputs[name + ".k_proj"] / E4M3_MAX)
                mod.v_scale.fill_(outputs[name + ".v_proj"] / E4M3_MAX)
    compressor = ModelCompressor.from_pretrained_model(model,
                                                       quantization_format="float-quantized")
    compressor.compress_model(model)
    model.save_pretrained(out)
    compressor.update_config(out)
    tok.save(os.path.join(out, "tokenizer.json"))
    if static:
        add_kv_cache_scheme(model, out, kv, outputs)


def add_kv_cache_scheme(model, out, kv, outputs):
    """The KV-cache part of compressed-tensors FP8, where the package left it out: its hooks look
    for `past_key_values` in the attention's forward, which transformers 5 renamed `cache`. Then
    the scheme (QuantizationArgs.model_dump()) and self_attn.k_scale / v_scale ([1], the model's
    dtype) are written as the package writes them with older transformers."""
    path = os.path.join(out, "config.json")
    with open(path) as f:
        config = json.load(f)
    if config["quantization_config"].get("kv_cache_scheme") is not None:
        return
    config["quantization_config"]["kv_cache_scheme"] = kv.model_dump(mode="json")
    with open(path, "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    weights = os.path.join(out, "model.safetensors")
    tensors = load_file(weights)
    for i in range(model.config.num_hidden_layers):
        attn = f"model.layers.{i}.self_attn"
        for proj, key in (("k_proj", "k_scale"), ("v_proj", "v_scale")):
            tensors[f"{attn}.{key}"] = torch.tensor([outputs[f"{attn}.{proj}"] / E4M3_MAX],
                                                    dtype=model.dtype)
    save_file(tensors, weights, metadata={"format": "pt"})


def write_by_hand(model, tok, out, layout, calibration):
    """Native block FP8 or ModelOpt, written tensor by tensor."""
    inputs, outputs = calibration
    tensors = {}
    for name, p in model.state_dict().items():
        module = name[:-len(".weight")]
        if not (name.endswith(".weight") and any(module.endswith(l) for l in LINEARS)):
            tensors[name] = p.contiguous()
            continue
        if layout == "fp8-block":
            q, s = quantize(p, "block")
            tensors[name], tensors[module + ".weight_scale_inv"] = q, s.contiguous()
        else:
            q, s = quantize(p, "tensor")
            tensors[name], tensors[module + ".weight_scale"] = q, s.reshape(())
            tensors[module + ".input_scale"] = torch.tensor(inputs[module] / E4M3_MAX)
            for proj, key in (("k_proj", "k_scale"), ("v_proj", "v_scale")):
                if module.endswith("self_attn." + proj):
                    tensors[module + "." + key] = torch.tensor(outputs[module] / E4M3_MAX)
    save_common(model, tok, out)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    if layout == "fp8-block":
        patch_config(out, quantization_config={
            "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
            "weight_block_size": [BLOCK, BLOCK]})
    else:
        with open(os.path.join(out, "hf_quant_config.json"), "w") as f:
            json.dump({"producer": {"name": "modelopt", "version": "0.19.0"},
                       "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
                                        "exclude_modules": ["lm_head"]}}, f, indent=2)


def check(out, original):
    """Every FP8 weight of `out`, dequantised, is within e4m3 rounding of the bf16 original:
    |q * s - w| <= |w| / 16 + s / 1024 (half a step of 3 mantissa bits; subnormal steps)."""
    with open(os.path.join(out, "config.json")) as f:
        qc = json.load(f).get("quantization_config") or {}
    block = qc.get("weight_block_size")
    names = 0
    with safe_open(os.path.join(out, "model.safetensors"), "pt") as f:
        keys = set(f.keys())
        for name in sorted(keys):
            t = f.get_tensor(name)
            if t.dtype != torch.float8_e4m3fn:
                continue
            module = name[:-len(".weight")]
            sname = module + (".weight_scale_inv" if block else ".weight_scale")
            assert sname in keys, f"{out}: {name} has no {sname}"
            s = f.get_tensor(sname)
            w = original[name].float()
            got = dequantize(t, s, block)
            smax = s.float().max()
            err = (got - w).abs() - (w.abs() / 16 + smax / 1024) * 1.01
            assert err.max() <= 0, f"{out}: {name} off by {err.max().item()}"
            names += 1
    assert names == 7 * 2, f"{out}: {names} FP8 weights, expected 14"
    return names


def load_dequantized(out, config):
    """An fp32 LlamaForCausalLM whose weights are `out`'s, FP8 ones dequantised (q * scale)."""
    with open(os.path.join(out, "config.json")) as f:
        qc = json.load(f).get("quantization_config") or {}
    block = qc.get("weight_block_size")
    state, input_scales = {}, {}
    with safe_open(os.path.join(out, "model.safetensors"), "pt") as f:
        for name in f.keys():
            t = f.get_tensor(name)
            if name.endswith(".input_scale"):
                input_scales[name[:-len(".input_scale")]] = t.float().reshape(())
            if t.dtype == torch.float8_e4m3fn:
                module = name[:-len(".weight")]
                s = f.get_tensor(module + (".weight_scale_inv" if block else ".weight_scale"))
                state[name] = dequantize(t, s, block)
            elif not name.endswith(("_scale", "_scale_inv")):
                state[name] = t.float()
    model = LlamaForCausalLM(config).float().eval()
    model.load_state_dict(state)
    return model, input_scales


def fake_quantize_activations(model, layout, input_scales):
    """Rounds every quantized linear layer's input to e4m3 as the layout says: per token
    (ct-fp8-dynamic), per token and 128 columns (fp8-block), or with the static input_scale."""
    def hook(mod, args, name):
        x = args[0].float()
        if name in input_scales:
            s = input_scales[name]
            return (to_e4m3(x / s).float() * s,)
        if layout == "fp8-block":  # the last group of a row may be short
            k = x.shape[-1]
            g = torch.nn.functional.pad(x, (0, -k % BLOCK)).unflatten(-1, (-1, BLOCK))
            s = scale_of(g.abs().amax(dim=-1, keepdim=True))
            return ((to_e4m3(g / s).float() * s).flatten(-2)[..., :k],)
        s = scale_of(x.abs().amax(dim=-1, keepdim=True))
        return (to_e4m3(x / s).float() * s,)
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and name != "lm_head":
            mod.register_forward_pre_hook(lambda m, a, name=name: hook(m, a, name))


@torch.no_grad()
def greedy(model, prompt, steps):
    """`steps` greedy tokens, each from a full recomputation, and the smallest top-2 margin."""
    ids, margins = list(prompt), []
    for _ in range(steps):
        logits = model(torch.tensor([ids])).logits[0, -1].double()
        top = torch.topk(logits, 2).values
        margins.append(float(top[0] - top[1]))
        ids.append(int(torch.argmax(logits)))
    return ids[len(prompt):], margins


def write_reference(out, layout, config, prompts, steps=6):
    """reference.json: {"cases": [{"prompt_token_ids", "dequantized_weights",
    "fp8_activations", and each one's "..._margins"}]}: greedy tokens of `out` in fp32
    transformers on the dequantised weights, with activations as they are and rounded to e4m3 as
    the layout scales them, and the top-2 logit margin of each step."""
    model, input_scales = load_dequantized(out, config)
    cases = [{"prompt_token_ids": p} for p in prompts]
    for key in ("dequantized_weights", "fp8_activations"):
        if key == "fp8_activations":
            fake_quantize_activations(model, layout, input_scales)
        for case in cases:
            case[key], case[key + "_margins"] = greedy(model, case["prompt_token_ids"], steps)
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="directory to write the layouts into")
    ap.add_argument("--layouts", default=",".join(LAYOUTS),
                    help="comma-separated subset of " + ", ".join(LAYOUTS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab-size", type=int, default=320, help="tokenizer training target")
    ap.add_argument("--check", action="store_true", help="verify the written weights")
    args = ap.parse_args()
    layouts = [l for l in args.layouts.split(",") if l]
    for l in layouts:
        if l not in LAYOUTS:
            sys.exit(f"unknown layout '{l}' (known: {', '.join(LAYOUTS)})")
    tok = make_tokenizer(args.vocab_size)
    base = make_model(args.seed, tok.get_vocab_size())
    original = {k: v.clone() for k, v in base.state_dict().items()}
    calibration = calibrate(base, args.seed)
    gen = torch.Generator().manual_seed(args.seed + 2)
    prompts = [tok.encode(TEXT[0]).ids] + [
        torch.randint(0, tok.get_vocab_size(), (n,), generator=gen).tolist() for n in (1, 7, 19)]
    for layout in layouts:
        out = os.path.join(args.out, layout)
        model = make_model(args.seed, tok.get_vocab_size())  # a fresh copy: compressing is in place
        if layout.startswith("ct-"):
            write_compressed_tensors(model, tok, out, layout == "ct-fp8-static", calibration)
        else:
            write_by_hand(model, tok, out, layout, calibration)
        write_reference(out, layout, base.config, prompts)
        msg = f"wrote {out}"
        if args.check:
            msg += f" (checked {check(out, original)} FP8 weights)"
        print(msg)


if __name__ == "__main__":
    main()
