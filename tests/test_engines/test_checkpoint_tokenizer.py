"""A checkpoint's tokenizer normalises text as the reference tokenizer does: composed and decomposed
spellings of the same text ("Café" typed, or "Cafe" + a combining accent from a macOS file name or a PDF)
give the same tokens, in both forms a checkpoint ships its tokenizer in."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from fixture_models import smollm2_tokenizer

pytest.importorskip("tokenizers")

from engines.diffusion.hf.tokenizer import CheckpointTokenizer

SPELLINGS = [
    ("Caf\u00e9 au lait", "Cafe\u0301 au lait"),
    ("na\u00efve r\u00e9sum\u00e9", "nai\u0308ve re\u0301sume\u0301"),
]


def vocab_and_merges(folder: Path) -> Path:
    """Dream's form: vocab.json and merges.txt (here SmolLM2's byte-level BPE) and tokenizer_config.json."""
    folder.mkdir()
    source = smollm2_tokenizer()
    (folder / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(source.tokens)}), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(source.merges) + "\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}), encoding="utf-8")
    return folder


def tokenizer_json(folder: Path, normalizer: bool) -> Path:
    """The tokenizer.json form, with Qwen2's NFC normaliser or (as LLaDA's) none."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    folder.mkdir()
    source = smollm2_tokenizer()
    merges = [(left, right) for left, right in (merge.split(" ", 1) for merge in source.merges)]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(source.tokens)}, merges=merges))
    if normalizer:
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


@pytest.mark.parametrize(("composed", "decomposed"), SPELLINGS)
def test_vocab_and_merges_compose_to_nfc_first(tmp_path: Path, composed: str, decomposed: str) -> None:
    tokenizer = CheckpointTokenizer(vocab_and_merges(tmp_path / "dream"))
    assert unicodedata.normalize("NFC", decomposed) == composed != decomposed
    assert tokenizer.encode(decomposed, add_bos=False) == tokenizer.encode(composed, add_bos=False)
    assert tokenizer.decode(tokenizer.encode(decomposed, add_bos=False)) == composed


@pytest.mark.parametrize(("composed", "decomposed"), SPELLINGS)
def test_a_tokenizer_json_normalises_as_its_file_says(tmp_path: Path, composed: str, decomposed: str) -> None:
    qwen = CheckpointTokenizer(tokenizer_json(tmp_path / "qwen", normalizer=True))
    assert qwen.encode(decomposed, add_bos=False) == qwen.encode(composed, add_bos=False)
    # Without a normaliser in the file the reference keeps the two apart, and so does Sharpen.
    plain = CheckpointTokenizer(tokenizer_json(tmp_path / "plain", normalizer=False))
    assert plain.encode(decomposed, add_bos=False) != plain.encode(composed, add_bos=False)
