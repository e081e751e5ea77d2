#!/usr/bin/env python3
"""Makes the fixtures of tests/model/ with independent writers and dequantisers.

  fixtures/smollm2_values.json  first values of a few SmolLM2 tensors as the `gguf` package
                                dequantises them, and q/k rows un-permuted with numpy
  fixtures/quant_types.gguf     one random tensor per ggml type (written by gguf.GGUFWriter),
                                each with `<name>.expected` = the gguf package's dequantisation
                                (f32), plus metadata of every value type
  fixtures/tiny_hf/             a sharded Hugging Face checkpoint written by `safetensors`
  ../fuzz/corpus/*/             small seed inputs for the GGUF and safetensors fuzz targets

Run from the repository root with the project venv:
  .venv/bin/python tests/model/make_gguf_fixture.py [models/SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")


def unpermute(w, n_head):
    """Inverse of llama.cpp's convert_hf_to_gguf.py `LlamaModel.permute`, which does
    w.reshape(n_head, 2, rows // n_head // 2, cols).swapaxes(1, 2).reshape(w.shape)."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def smollm2_values(model_path):
    r = gguf.GGUFReader(model_path)
    tensors = {t.name: t for t in r.tensors}
    n_head = int(r.fields["llama.attention.head_count"].contents())
    n_kv = int(r.fields["llama.attention.head_count_kv"].contents())

    def deq(name):
        t = tensors[name]
        return gguf.quants.dequantize(t.data, t.tensor_type).reshape(
            [int(d) for d in reversed(t.shape)])

    out = {"model_size": os.path.getsize(model_path), "values": [], "qk_rows": []}
    for name in ["token_embd.weight", "blk.0.attn_norm.weight", "blk.0.ffn_down.weight",
                 "blk.29.ffn_up.weight", "output_norm.weight"]:
        flat = deq(name).reshape(-1)
        mid = flat.shape[0] // 2 + 3  # 16 values from the middle too
        out["values"].append({"name": name, "type": tensors[name].tensor_type.name,
                              "first": [float(v) for v in flat[:16]],
                              "mid_offset": mid, "mid": [float(v) for v in flat[mid:mid + 16]]})
    for name, heads in [("blk.0.attn_q.weight", n_head), ("blk.0.attn_k.weight", n_kv),
                        ("blk.7.attn_k.weight", n_kv)]:
        hf = unpermute(deq(name), heads)
        for row in [0, 1, 31, 32, 33, 63, 64, hf.shape[0] - 1]:
            out["qk_rows"].append({"name": name, "row": row,
                                   "first": [float(v) for v in hf[row, :8]]})
    return out


def random_blocks(rng, qtype, n_blocks):
    """Random bytes with finite f16 scales written where each block keeps them."""
    _, type_size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    scale_offsets = {Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q8_0: [0], Q.Q4_K: [0, 2],
                     Q.Q5_K: [0, 2], Q.Q6_K: [208]}[qtype]
    for off in scale_offsets:
        scales = rng.uniform(-0.05, 0.05, size=n_blocks).astype(np.float16)
        raw[:, off:off + 2] = scales.view(np.uint8).reshape(n_blocks, 2)
    return raw


def quant_types(path):
    rng = np.random.default_rng(1234)
    w = gguf.GGUFWriter(path, "llama")
    w.add_custom_alignment(64)
    # Metadata of every value type (read back by the C++ test).
    w.add_key_value("test.u8", 200, gguf.GGUFValueType.UINT8)
    w.add_key_value("test.i8", -100, gguf.GGUFValueType.INT8)
    w.add_key_value("test.u16", 60000, gguf.GGUFValueType.UINT16)
    w.add_key_value("test.i16", -30000, gguf.GGUFValueType.INT16)
    w.add_key_value("test.u32", 4000000000, gguf.GGUFValueType.UINT32)
    w.add_key_value("test.i32", -2000000000, gguf.GGUFValueType.INT32)
    w.add_key_value("test.u64", 2**63 + 5, gguf.GGUFValueType.UINT64)
    w.add_key_value("test.i64", -(2**40), gguf.GGUFValueType.INT64)
    w.add_key_value("test.f32", 0.25, gguf.GGUFValueType.FLOAT32)
    w.add_key_value("test.f64", -1.0e-300, gguf.GGUFValueType.FLOAT64)
    w.add_key_value("test.bool", True, gguf.GGUFValueType.BOOL)
    w.add_key_value("test.string", "héllo ✓", gguf.GGUFValueType.STRING)
    w.add_key_value("test.strings", ["a", "", "日本"], gguf.GGUFValueType.ARRAY)
    w.add_key_value("test.ints", [1, -2, 3], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32)
    w.add_key_value("test.floats", [0.5, -1.5], gguf.GGUFValueType.ARRAY,
                    gguf.GGUFValueType.FLOAT32)
    w.add_key_value("test.nested", [[1, 2], [3]], gguf.GGUFValueType.ARRAY)

    specs = [("f32", Q.F32, (3, 7)), ("f16", Q.F16, (2, 5)), ("bf16", Q.BF16, (4, 3)),
             ("q4_0", Q.Q4_0, (3, 64)), ("q4_1", Q.Q4_1, (2, 96)), ("q8_0", Q.Q8_0, (5, 32)),
             ("q4_k", Q.Q4_K, (2, 512)), ("q6_k", Q.Q6_K, (3, 256)), ("q5_k", Q.Q5_K, (1, 256))]
    for name, qtype, (rows, cols) in specs:
        if qtype == Q.F32:
            data = rng.standard_normal((rows, cols)).astype(np.float32)
            raw, raw_dtype = data, None
        elif qtype == Q.F16:
            data = rng.standard_normal((rows, cols)).astype(np.float16)
            raw, raw_dtype = data, None
        elif qtype == Q.BF16:
            f = rng.standard_normal((rows, cols)).astype(np.float32)
            raw = (f.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(rows, -1)
            raw_dtype = qtype
        else:
            block, _ = gguf.GGML_QUANT_SIZES[qtype]
            raw = random_blocks(rng, qtype, rows * cols // block).reshape(rows, -1)
            raw_dtype = qtype
        w.add_tensor(name, raw, raw_dtype=raw_dtype)
        if qtype != Q.Q5_K or hasattr(gguf.quants, "Q5_K"):
            expected = gguf.quants.dequantize(raw, qtype).astype(np.float32).reshape(rows, cols)
            w.add_tensor(name + ".expected", expected)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tiny_hf(root):
    """A 1-layer Llama in two shards; value k of tensor t is ((k % 17) - 8) / 8 + t (exact in
    f16), t being the tensor's index in NAMES."""
    os.makedirs(root, exist_ok=True)
    hidden, inter, vocab, heads, kv_heads = 8, 16, 32, 2, 1
    head_dim = hidden // heads
    shapes = {
        "model.embed_tokens.weight": (vocab, hidden),
        "model.layers.0.input_layernorm.weight": (hidden,),
        "model.layers.0.self_attn.q_proj.weight": (heads * head_dim, hidden),
        "model.layers.0.self_attn.k_proj.weight": (kv_heads * head_dim, hidden),
        "model.layers.0.self_attn.v_proj.weight": (kv_heads * head_dim, hidden),
        "model.layers.0.self_attn.o_proj.weight": (hidden, heads * head_dim),
        "model.layers.0.post_attention_layernorm.weight": (hidden,),
        "model.layers.0.mlp.gate_proj.weight": (inter, hidden),
        "model.layers.0.mlp.up_proj.weight": (inter, hidden),
        "model.layers.0.mlp.down_proj.weight": (hidden, inter),
        "model.norm.weight": (hidden,),
    }
    tensors = {}
    for t, (name, shape) in enumerate(shapes.items()):
        n = int(np.prod(shape))
        v = ((np.arange(n) % 17) - 8) / 8.0 + t
        # Odd tensors as f16, even ones as f32: both paths are exercised.
        tensors[name] = v.reshape(shape).astype(np.float16 if t % 2 else np.float32)
    names = list(shapes)
    shard1 = {k: tensors[k] for k in names[:5]}
    shard2 = {k: tensors[k] for k in names[5:]}
    files = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    save_file(shard1, os.path.join(root, files[0]), metadata={"format": "pt"})
    save_file(shard2, os.path.join(root, files[1]), metadata={"format": "pt"})
    weight_map = {k: files[0] for k in shard1} | {k: files[1] for k in shard2}
    with open(os.path.join(root, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": 1,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "vocab_size": vocab,
        "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": [2, 3],
        "rope_scaling": None, "torch_dtype": "float32",
    }
    with open(os.path.join(root, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(root, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": [{"name": "tool_use", "template": "TOOLS"},
                                     {"name": "default", "template": "{{ messages }}"}]}, f)
    with open(os.path.join(root, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "model": {"type": "BPE", "vocab": {}, "merges": []}}, f)


def fuzz_seeds(root):
    """Small valid inputs for the libFuzzer targets in tests/fuzz (one per parser)."""
    gdir = os.path.join(root, "gguf_fuzz")
    sdir = os.path.join(root, "safetensors_fuzz")
    os.makedirs(gdir, exist_ok=True)
    os.makedirs(sdir, exist_ok=True)
    rng = np.random.default_rng(5)
    w = gguf.GGUFWriter(os.path.join(gdir, "small.gguf"), "llama")
    w.add_block_count(1)
    w.add_key_value("t.f", 1.5, gguf.GGUFValueType.FLOAT32)
    w.add_key_value("t.b", True, gguf.GGUFValueType.BOOL)
    w.add_key_value("t.s", ["x", "yz"], gguf.GGUFValueType.ARRAY)
    w.add_key_value("t.n", [[1], [2, 3]], gguf.GGUFValueType.ARRAY)
    w.add_tensor("a", rng.standard_normal((2, 3)).astype(np.float32))
    w.add_tensor("q", random_blocks(rng, Q.Q8_0, 1), raw_dtype=Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    save_file({"w": np.arange(6, dtype=np.float16).reshape(2, 3),
               "b": np.ones(2, dtype=np.float32)},
              os.path.join(sdir, "small.safetensors"), metadata={"format": "pt"})


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        HERE, "..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    os.makedirs(FIXTURES, exist_ok=True)
    with open(os.path.join(FIXTURES, "smollm2_values.json"), "w") as f:
        json.dump(smollm2_values(model), f, indent=1)
    quant_types(os.path.join(FIXTURES, "quant_types.gguf"))
    tiny_hf(os.path.join(FIXTURES, "tiny_hf"))
    fuzz_seeds(os.path.join(HERE, "..", "fuzz", "corpus"))


if __name__ == "__main__":
    main()
