"""A 135M diffusion-form stand-in built from the embedded AR model's own weights, for cost benchmarks.

It has exactly the AR model's size and quantization, so a diffusion pass and an AR token are measured
on the same weights. It is NOT a trained diffusion model: its text and its confidences mean nothing
beyond "what an AR model says when run bidirectionally". Use it for timings, never for quality.
"""

from __future__ import annotations

from pathlib import Path

import gguf

MASK_TOKEN_ID = 16  # SmolLM2's "<empty_output>", unused in text


def write_stand_in(source: Path, target: Path, *, arch: str, causal: bool | None) -> Path:
    """Copy `source` (a llama GGUF) as `arch` with a mask token, shifted logits and optional causal flag."""
    if target.exists():
        return target
    reader = gguf.GGUFReader(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(target), arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        name = f"{arch}.{field.name.removeprefix('llama.')}" if field.name.startswith("llama.") else field.name
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), value_type, sub_type=sub_type)
    writer.add_mask_token_id(MASK_TOKEN_ID)
    writer.add_bool("diffusion.shift_logits", True)  # an AR model predicts the next position
    if causal is not None:
        writer.add_bool(f"{arch}.attention.causal", causal)
    for tensor in reader.tensors:
        writer.add_tensor_info(
            tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes, tensor.tensor_type
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in reader.tensors:
        writer.write_tensor_data(tensor.data)
    writer.close()
    return target
