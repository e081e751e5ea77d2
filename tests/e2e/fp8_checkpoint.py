"""A hand-written compressed-tensors FP8 checkpoint for the tests of loading failures: rank-local
scale errors (tests/e2e/test_tensor_parallel.py, tests/python/test_llm_parallel.py)."""

import json
import struct


def write_fp8_llama(d, nan_at):
    """A tiny Llama in compressed-tensors FP8 (e4m3 weights, a scale per output channel) with the
    vocabulary of the default model (its tokenizer serves it), written by hand; layer 0's
    gate_proj scale of output row `nan_at` is NaN."""
    hidden, inter, heads, kv_heads, vocab = 64, 128, 4, 2, 49152
    d.mkdir()
    weights = {"type": "float", "num_bits": 8, "strategy": "channel"}
    acts = {"type": "float", "num_bits": 8, "dynamic": True, "strategy": "token"}
    (d / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
        "intermediate_size": inter, "num_hidden_layers": 2, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "vocab_size": vocab, "max_position_embeddings": 512,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True,
        "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
        "quantization_config": {
            "quant_method": "compressed-tensors", "format": "float-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                          "input_activations": acts}},
            "ignore": ["lm_head"]}}))
    one = struct.pack("<H", 0x3f80)  # bf16 1.0
    tensors = {"model.embed_tokens.weight": ("BF16", [vocab, hidden],
                                             struct.pack("<H", 0x3c00) * (vocab * hidden)),
               "model.norm.weight": ("BF16", [hidden], one * hidden)}
    head = hidden // heads
    shapes = {"self_attn.q_proj": (heads * head, hidden), "self_attn.k_proj": (kv_heads * head, hidden),
              "self_attn.v_proj": (kv_heads * head, hidden), "self_attn.o_proj": (hidden, heads * head),
              "mlp.gate_proj": (inter, hidden), "mlp.up_proj": (inter, hidden),
              "mlp.down_proj": (hidden, inter)}
    for layer in range(2):
        prefix = f"model.layers.{layer}."
        for norm in ("input_layernorm", "post_attention_layernorm"):
            tensors[prefix + norm + ".weight"] = ("BF16", [hidden], one * hidden)
        for name, (n, k) in shapes.items():
            # e4m3 bytes 0x00..0x77 (0 to 240, never NaN), the same pattern in every layer.
            tensors[prefix + name + ".weight"] = ("F8_E4M3", [n, k],
                                                  bytes(i * 37 % 120 for i in range(n * k)))
            scales = [float("nan") if (layer, name, i) == (0, "mlp.gate_proj", nan_at) else 1e-3
                      for i in range(n)]
            tensors[prefix + name + ".weight_scale"] = ("F32", [n, 1],
                                                        struct.pack(f"<{n}f", *scales))
    header, offset = {}, 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(d / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, data in tensors.values():
            f.write(data)
