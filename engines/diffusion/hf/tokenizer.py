"""A checkpoint's own tokenizer and chat template, through the `tokenizers` library (no remote code).

tokenizer.json is used where the checkpoint has one. Qwen-style checkpoints that ship only vocab.json
and merges.txt (Dream) get the byte-level BPE those files define, with Qwen2's NFC normalisation and
pre-tokenizer split, plus the added tokens listed in tokenizer_config.json. A tokenizer.json carries its
own normaliser (Qwen2's: NFC; LLaDA's: none), which `tokenizers` applies as the reference does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engines.chat_template import render_instruction
from engines.messages import Instruction, plain_text
from models.errors import MissingModelFile
from models.hf_checkpoint import CheckpointError

QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
END_OF_TURN = ("<|eot_id|>", "<|im_end|>", "<|endoftext|>", "</s>", "<|end_of_text|>")


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


class CheckpointTokenizer:
    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        self.folder = folder
        config_path = folder / "tokenizer_config.json"
        self.config: dict[str, Any] = {}
        if config_path.is_file():
            try:
                self.config = json.loads(config_path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as error:
                raise CheckpointError(config_path, f"is not valid JSON ({error})", "Download it again.") from error
        if (folder / "tokenizer.json").is_file():
            try:
                self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            except Exception as error:  # tokenizers raises a bare Exception for malformed files
                raise CheckpointError(
                    folder / "tokenizer.json", f"cannot be read ({error})", "Download it again."
                ) from error
        elif (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
            self._tokenizer = self._byte_level_bpe(folder)
        else:
            raise MissingModelFile(
                folder, "has no tokenizer (tokenizer.json, or vocab.json and merges.txt)", "Download it again."
            )
        self.bos_text = _token_text(self.config.get("bos_token"))
        self.eos_text = _token_text(self.config.get("eos_token"))
        self.add_bos = bool(self.config.get("add_bos_token", False))
        template = self.config.get("chat_template")
        if isinstance(template, list):  # named templates: take the default one
            template = next((t.get("template") for t in template if t.get("name") == "default"), None)
        self.chat_template: str | None = template if isinstance(template, str) else None

    def _byte_level_bpe(self, folder: Path) -> Any:
        from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

        model = models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt"))
        tokenizer = Tokenizer(model)
        # Qwen2's tokenizer (and Dream's) composes text to NFC first: "e" + U+0301 reads as "é".
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tokenizer.decoder = decoders.ByteLevel()
        added = self.config.get("added_tokens_decoder", {})
        ordered = sorted(added.items(), key=lambda item: int(item[0]))
        tokenizer.add_special_tokens([AddedToken(entry["content"], special=True) for _, entry in ordered])
        return tokenizer

    def token_id(self, text: str | None) -> int | None:
        return None if text is None else self._tokenizer.token_to_id(text)

    def encode(self, text: str, *, add_bos: bool) -> list[int]:
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids if text else []
        bos = self.token_id(self.bos_text)
        if add_bos and bos is not None and (not ids or ids[0] != bos):
            ids = [bos, *ids]
        return ids

    def instruction_tokens(self, instruction: Instruction) -> list[int]:
        if self.chat_template is None:
            return self.encode(plain_text(instruction), add_bos=True)
        rendered = render_instruction(
            self.chat_template, instruction, bos_text=self.bos_text or "", eos_text=self.eos_text or ""
        )
        return self.encode(rendered.text, add_bos=self.add_bos and not rendered.has_bos)

    def decode(self, tokens: Sequence[int]) -> str:
        return self._tokenizer.decode(list(tokens), skip_special_tokens=False)

    def end_of_text_ids(self, configured: Sequence[int]) -> frozenset[int]:
        ids = set(configured)
        for text in (self.eos_text, *END_OF_TURN):
            token = self.token_id(text)
            if token is not None:
                ids.add(token)
        return frozenset(ids)
