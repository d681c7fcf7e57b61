"""The writing adapter's chat turns (training/chat_turns.py): each last reply recalls what was told, none of the
probes' turns, names or values is learned from (training/chat_probes.py), and a conversation is encoded as the AR
engine renders the chat call."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from training.chat_probes import mentions_probe, probed_phrases, probed_words, probes
from training.chat_turns import chat_turns
from training.data import distinct_instructions, load_pairs

ROOT = Path(__file__).resolve().parents[2]
OPEN_FILES = [ROOT / "training/data" / name for name in ("drafts-open.jsonl", "drafts-open-seed1.jsonl")]
OPEN_PAIRS = distinct_instructions([pair for path in OPEN_FILES for pair in load_pairs(path)])
TURNS = chat_turns(3000, seed=0, between=OPEN_PAIRS, held_out=mentions_probe)


def words(text: str) -> set[str]:
    return {word.lower() for word in re.findall(r"[\w']+", text)}


def test_every_last_reply_says_what_the_user_told() -> None:
    for turns in TURNS:
        roles = [message["role"] for message in turns.messages]
        assert roles == ["user", "assistant"] * (len(roles) // 2)
        assert turns.value.lower() in turns.messages[0]["content"].lower()
        assert turns.value.lower() in turns.reply.lower()
    assert {len(turns.messages) for turns in TURNS} == {4, 6, 8}  # none, one or two turns between
    assert len({turns.kind for turns in TURNS}) >= 10


def test_some_turns_between_are_open_drafts() -> None:
    instructions = {pair.instruction for pair in OPEN_PAIRS}
    between = [m["content"] for turns in TURNS for m in turns.messages[2:-2] if m["role"] == "user"]
    assert 0.3 < sum(text in instructions for text in between) / len(between) < 0.9


def test_no_conversation_holds_a_probed_turn_name_or_value() -> None:
    said = [message["content"] for turns in TURNS for message in turns.messages]
    probed = {word.lower() for word in probed_words()}
    assert not [text for text in said if words(text) & probed]
    fixed_parts = probed_phrases()
    assert "my name is" in fixed_parts and "what is my name?" in fixed_parts
    assert not [text for text in said if any(part in text.lower() for part in fixed_parts)]
    # The probes' own conversations hold what they ask about.
    for rows in probes().values():
        assert all(value in turns[0]["content"] for _, value, turns in rows)


def test_a_conversation_is_the_same_whatever_the_count() -> None:
    assert chat_turns(40, seed=3)[:15] == chat_turns(15, seed=3)
    assert chat_turns(5, seed=3) != chat_turns(5, seed=4)


def test_the_encoder_lays_a_conversation_out_as_the_ar_engine_does(tiny_llama_path: Path) -> None:
    """What the adapter learns from is token for token the chat call the AR engine makes, then the last reply."""
    pytest.importorskip("torch", reason="training the adapter needs the torch extra")
    from engines.llama_ar import LlamaAREngine, LlamaSettings
    from training.write import Encoder

    engine = LlamaAREngine(tiny_llama_path, "tiny", LlamaSettings(n_ctx=2048))
    encoder = Encoder(tiny_llama_path, max_answer=200)
    for turns in [turns for turns in TURNS if len(turns.messages) > 4][:8] + TURNS[:4]:
        row = encoder.chat(turns)
        assert row.prompt == engine.chat_prompt(turns.prompt, 200)
        assert row.answer == [*engine.tokenize(turns.reply, add_bos=False, special=False), encoder.eos]
