"""Which engine reads each draft option: the declarations, the engine a request's options pin, and the README's
table of them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.cli.writing import flag_name
from app.domain import option_engines as module
from app.domain.draft_request import DraftRequest
from app.domain.option_engines import OptionConflict, option_engines, option_table, pinned, set_options
from app.server.requests import field_name
from engines.diffusion.settings import DiffusionSettings
from engines.options import options
from router.request import ENGINES

README = Path(__file__).resolve().parents[2] / "README.md"
COLUMNS = [("`sharpen draft`, `infill`", flag_name), ("server body", field_name)]


def test_every_draft_option_declares_the_engines_that_read_it() -> None:
    declared = option_engines()
    assert set(declared) >= {item.name for item in options(DiffusionSettings)}
    assert {"tokens", "quality", "chat", "record_trace"} <= set(declared)
    assert all(read and set(read) <= set(ENGINES) for read in declared.values())
    # What the AR drafter takes of a draft's options (app/orchestration/drafters.py).
    read_by_ar = {name for name, read in declared.items() if "ar" in read}
    assert read_by_ar == {"tokens", "temperature", "top_p", "seed", "record_trace"}


def test_the_readme_table_is_the_declarations() -> None:
    table = option_table(COLUMNS)
    assert table in README.read_text(), f"README.md's table of draft options is out of date; it reads:\n{table}"


def test_options_both_engines_read_pin_nothing() -> None:
    request = DraftRequest("draft", "Hi", tokens=16, overrides={"seed": 1, "temperature": 0.5, "steps": None})
    assert set_options(request) == ["tokens", "temperature", "seed"]
    assert pinned(request) == request and pinned(DraftRequest("draft", "Hi")).engine is None


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (DraftRequest("draft", "Hi", overrides={"threshold": 0.9}), "threshold is read only by the diffusion engine"),
        (DraftRequest("draft", "Hi", quality="best"), "quality is read only by the diffusion engine"),
        (
            DraftRequest("draft", "Hi", chat=False, record_trace=True, spelling=flag_name),
            "--no-chat is read only by the diffusion engine",
        ),
        (
            DraftRequest("draft", "Hi", overrides={"steps": 8, "top_k": 4, "seed": 2}, spelling=field_name),
            "sharpen.steps and sharpen.top_k are read only by the diffusion engine",
        ),
    ],
)
def test_an_option_only_diffusion_reads_pins_diffusion_with_the_reason(request_: DraftRequest, reason: str) -> None:
    pin = pinned(request_)
    assert (pin.engine, pin.engine_because) == ("diffusion", reason)
    assert pinned(pin) == pin, "a pinned request stays as it is"
    assert pinned(dataclasses.replace(request_, engine="diffusion")).engine_because == ""


def test_an_option_the_engine_asked_for_does_not_read_is_a_conflict() -> None:
    with pytest.raises(OptionConflict) as conflict:
        pinned(DraftRequest("draft", "Hi", overrides={"steps": 8}, engine="ar", spelling=flag_name))
    assert str(conflict.value) == (
        "--engine asks for the AR engine, but --steps is read only by the diffusion engine: drop one or the other"
    )
    from_model = DraftRequest("draft", "Hi", overrides={"eos": "free"}, engine="ar", spelling=lambda name: "model 'x'")
    with pytest.raises(OptionConflict, match="model 'x' asks for the AR engine"):
        pinned(from_model)


def test_options_that_pin_different_engines_are_a_conflict(monkeypatch: pytest.MonkeyPatch) -> None:
    """No option only AR reads is declared today: one stands in, to see what declaring one would do."""
    declared = option_engines() | {"ar_only": ("ar",)}
    monkeypatch.setattr(module, "option_engines", lambda: declared)
    assert pinned(DraftRequest("draft", "Hi", overrides={"ar_only": 1})).engine == "ar"
    with pytest.raises(OptionConflict) as conflict:
        pinned(DraftRequest("draft", "Hi", overrides={"ar_only": 1, "steps": 8, "threshold": 0.5}))
    assert str(conflict.value) == (
        "the AR engine does not read steps and threshold, and the diffusion engine does not read ar_only: no engine "
        "reads every option given"
    )
