"""What a chat call answers: one instruction (a single user turn) or a whole conversation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# One turn of a conversation, as OpenAI's API and the chat templates spell it: {"role": ..., "content": ...}.
ChatMessage = Mapping[str, str]
Instruction = str | Sequence[ChatMessage]


def as_messages(instruction: Instruction) -> list[dict[str, str]]:
    if isinstance(instruction, str):
        return [{"role": "user", "content": instruction}]
    return [{"role": message["role"], "content": message["content"]} for message in instruction]


def is_blank(instruction: Instruction) -> bool:
    return not any(message["content"].strip() for message in as_messages(instruction))


def plain_text(instruction: Instruction) -> str:
    """The conversation as plain text, for a model without a chat template."""
    return "\n\n".join(message["content"] for message in as_messages(instruction))
