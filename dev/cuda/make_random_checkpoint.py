"""A Llama-3.1-8B-shaped Hugging Face checkpoint with random bf16 weights, written by
transformers' save_pretrained (the start-up measurement of dev/cuda/device_run.sh).

    python3 dev/cuda/make_random_checkpoint.py OUT_DIR [NUM_LAYERS]
"""
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main() -> None:
    out = sys.argv[1]
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    config = LlamaConfig(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336,
        num_hidden_layers=layers, num_attention_heads=32, num_key_value_heads=8,
        max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        bos_token_id=128000, eos_token_id=[128001, 128008, 128009],
        tie_word_embeddings=False, torch_dtype="bfloat16")
    begin = time.time()
    torch.manual_seed(0)
    with torch.device("cuda"):  # random init on the GPU: seconds instead of minutes
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    print(f"wrote {out}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters "
          f"in {time.time() - begin:.1f} s")


if __name__ == "__main__":
    main()
