#!/usr/bin/env python3
"""Writes a copy of a Llama-family GGUF file that keeps only its first N transformer blocks.

The device machine takes at most 64 MiB of files per run, and SmolLM2-135M-Instruct.Q4_1 is 94
MiB; its first blocks with the full vocabulary (token embedding, tied LM head) and the real
tokenizer metadata fit. Every kept tensor is copied byte for byte (same quantisation); only
`<arch>.block_count` changes.

  .venv/bin/python dev/cuda/trim_gguf.py models/SmolLM2-135M-Instruct.Q4_1.gguf out.gguf 10

Needs the `gguf` package (pip install gguf).
"""
import re
import sys

import gguf


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit(f"usage: {sys.argv[0]} IN.gguf OUT.gguf NUM_BLOCKS")
    src, dst, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # written by GGUFWriter itself
        value = field.contents()
        vtype = field.types[0]
        if name == f"{arch}.block_count":
            value = keep
        if vtype == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(name, value, vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(name, value, vtype)
    kept = 0
    for t in reader.tensors:
        m = re.match(r"blk\.(\d+)\.", t.name)
        if m and int(m.group(1)) >= keep:
            continue
        # t.data is [rows, bytes per row] for quantised types: the writer derives the shape.
        writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
        kept += 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"{dst}: {kept} of {len(reader.tensors)} tensors, {keep} blocks")


if __name__ == "__main__":
    main()
