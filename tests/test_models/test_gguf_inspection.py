"""GGUF inspection: the fast header reader against the gguf package's own reader, and what files say."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_models import write_tiny_model
from gguf import GGUFReader

from models.errors import MissingModelFile, NotGGUFFile, TruncatedGGUFFile
from models.gguf_header import ArraySummary, read_gguf_header
from models.gguf_info import FimTokens, inspect_gguf


def test_header_reader_agrees_with_the_gguf_package(tiny_llama_path: Path) -> None:
    ours = read_gguf_header(tiny_llama_path)
    reference = GGUFReader(tiny_llama_path)
    for key, field in reference.fields.items():
        if key.startswith("GGUF."):
            continue
        value = ours.metadata[key]
        if isinstance(value, ArraySummary):
            assert value.length == len(field.data), key
        else:
            expected = field.contents()
            assert value == pytest.approx(expected) if isinstance(expected, float) else value == expected, key
    assert [t.name for t in ours.tensors] == [t.name for t in reference.tensors]
    assert [t.n_bytes for t in ours.tensors] == [int(t.n_bytes) for t in reference.tensors]
    assert ours.data_end == tiny_llama_path.stat().st_size


def test_embedded_model_facts(embedded_model_path: Path) -> None:
    info = inspect_gguf(embedded_model_path)
    assert info.architecture == "llama"
    assert info.file_type == "Q4_1"
    assert info.context_length == 8192
    assert info.vocab_size == 49152
    assert info.n_layers == 30
    assert 130e6 < info.n_parameters < 140e6
    assert info.chat_template and "<|im_start|>" in info.chat_template
    assert info.fim is None and info.mask_token_id is None
    assert not info.is_diffusion


def test_diffusion_metadata(model_dir: Path) -> None:
    llada = inspect_gguf(
        write_tiny_model(
            model_dir / "h-llada.gguf", arch="llada", mask_token_id=16, shift_logits=False, with_tensors=False
        )
    )
    assert llada.is_llama_cpp_diffusion and llada.mask_token_id == 16 and llada.shift_logits is False
    dream = inspect_gguf(
        write_tiny_model(model_dir / "h-dream.gguf", arch="dream", mask_token_id=16, with_tensors=False)
    )
    assert dream.is_llama_cpp_diffusion and dream.shift_logits is True  # absent key means shift
    ours = inspect_gguf(
        write_tiny_model(model_dir / "h-cache.gguf", causal=False, mask_token_id=16, with_tensors=False)
    )
    assert ours.is_cacheable_diffusion and not ours.is_llama_cpp_diffusion and ours.causal_attention is False
    ar_with_mask = inspect_gguf(write_tiny_model(model_dir / "h-ar.gguf", mask_token_id=16, with_tensors=False))
    assert not ar_with_mask.is_diffusion


def test_fim_tokens_are_read(tiny_fim_path: Path) -> None:
    assert inspect_gguf(tiny_fim_path).fim == FimTokens(4, 5, 6)


def test_truncated_inside_the_header(tmp_path: Path, tiny_llama_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_llama_path.read_bytes()[:5000])
    with pytest.raises(TruncatedGGUFFile, match="ends inside its header"):
        inspect_gguf(cut)


def test_truncated_tensor_data(truncated_path: Path) -> None:
    with pytest.raises(TruncatedGGUFFile, match=r"tensors need [\d,]+ bytes but the file has"):
        inspect_gguf(truncated_path)


def test_not_gguf_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(NotGGUFFile, match="only 0 bytes"):
        inspect_gguf(empty)
    safetensors = tmp_path / "model.safetensors"
    safetensors.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    with pytest.raises(NotGGUFFile, match="not b'GGUF'"):
        inspect_gguf(safetensors)
    with pytest.raises(NotGGUFFile, match="is a folder"):
        inspect_gguf(tmp_path)
    with pytest.raises(MissingModelFile):
        inspect_gguf(tmp_path / "nope.gguf")


def test_unknown_gguf_version(tmp_path: Path) -> None:
    future = tmp_path / "future.gguf"
    future.write_bytes(b"GGUF" + (99).to_bytes(4, "little") + bytes(16))
    with pytest.raises(NotGGUFFile, match="version 99"):
        inspect_gguf(future)
