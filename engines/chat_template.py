"""Render a model's own chat template (the Jinja text stored in its GGUF) for an instruction or a conversation."""

from __future__ import annotations

from dataclasses import dataclass

from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from engines.messages import Instruction, as_messages


@dataclass(frozen=True)
class RenderedChat:
    text: str
    # The template wrote the BOS text itself, so the tokenizer must not add another.
    has_bos: bool


def render_instruction(template: str, instruction: Instruction, *, bos_text: str, eos_text: str) -> RenderedChat:
    formatter = Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=bos_text)
    rendered = formatter(messages=as_messages(instruction))  # type: ignore[arg-type]
    return RenderedChat(text=rendered.prompt, has_bos=bool(rendered.added_special))
