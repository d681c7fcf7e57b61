"""F2 pulls a model from the Hub with progress and switches to it (loopback Hub, real client)."""

from __future__ import annotations

import os
from pathlib import Path

from hub_server import FakeHub, HubFile
from textual.pilot import Pilot
from textual.widgets import DataTable, ProgressBar
from ui_support import AppFactory, make_config

from app.storage.paths import sharpen_paths
from ui.app import SharpenApp
from ui.screens.models import ModelsScreen

ENTRY = """
[catalogue.tiny-draft]
role = "draft"
engine = "llama-diffusion"
source = "hf:acme/tiny-draft-GGUF/tiny-draft.gguf"
needs_ram_gib = 0.1
"""


def app_with_entry(make_app: AppFactory) -> SharpenApp:
    config_file = sharpen_paths().config_file
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(ENTRY)
    return make_app(config=make_config(autocomplete=False))


async def highlight_entry(app: SharpenApp, pilot: Pilot) -> tuple[ModelsScreen, DataTable[str]]:
    """Open F2 and put the cursor on the test entry."""
    await pilot.press("f2")
    screen = app.screen
    assert isinstance(screen, ModelsScreen)
    table = screen.query_one("#models", DataTable)
    table.move_cursor(row=[m.name for m in screen.models].index("tiny-draft"))
    return screen, table


async def test_pull_with_progress_then_use_for_drafts(
    make_app: AppFactory, hub: FakeHub, tiny_cacheable_path: Path
) -> None:
    content = tiny_cacheable_path.read_bytes()
    hub.add("acme/tiny-draft-GGUF", {"tiny-draft.gguf": HubFile(content)})
    app = app_with_entry(make_app)
    async with app.run_test(size=(100, 30)) as pilot:
        screen, table = await highlight_entry(app, pilot)
        assert table.get_row("tiny-draft")[3] == "not pulled"
        await pilot.press("p")
        await app.workers.wait_for_complete()
        await pilot.pause()
        bar = screen.query_one("#pull-progress", ProgressBar)
        assert bar.total == len(content) and bar.progress == len(content)
        assert "downloaded, verified" in str(screen.query_one("#pull-status").render())
        assert table.get_row("tiny-draft")[3] == f"{len(content) / 1e6:,.0f} MB"
        await pilot.press("d")
        await pilot.pause()
        assert app.service.config.models.draft == "tiny-draft"
        assert "diffusion" in app.service.routing.present_engines()
        assert os.environ["HF_HOME"] in str(app.service.models.resolve("tiny-draft").path)


async def test_a_failed_pull_is_reported_on_the_screen(make_app: AppFactory, hub: FakeHub) -> None:
    app = app_with_entry(make_app)  # the hub has no such repo
    async with app.run_test(size=(100, 30)) as pilot:
        screen, _table = await highlight_entry(app, pilot)
        await pilot.press("p")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "repository acme/tiny-draft-GGUF was not found" in str(screen.query_one("#pull-status").render())
        assert screen.pulling is None


async def test_w_points_writing_at_the_highlighted_model(make_app: AppFactory) -> None:
    app = make_app(config=make_config(autocomplete=False))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f2")
        screen = app.screen
        assert isinstance(screen, ModelsScreen)
        screen.query_one("#models", DataTable).move_cursor(row=[m.name for m in screen.models].index("sharpen-draft"))
        await pilot.press("w")
        await pilot.pause()
        assert app.service.config.models.write == "", "a drafter is no writing model: refused, nothing changed"
        await pilot.press("f2")
        screen = app.screen
        assert isinstance(screen, ModelsScreen)
        screen.query_one("#models", DataTable).move_cursor(row=0)  # the embedded AR model
        await pilot.press("w")
        await pilot.pause()
        assert app.service.config.models.write == "smollm2-135m-instruct"
        assert 'write = "smollm2-135m-instruct"' in sharpen_paths().config_file.read_text()


async def test_g_pulls_an_sdar_model_ready_for_llama_cpp_then_d_drafts_with_it(
    make_app: AppFactory, hub: FakeHub, tmp_path: Path
) -> None:
    from fixture_checkpoints import random_weights, write_checkpoint

    folder = write_checkpoint(tmp_path / "sdar", "sdar", weights=random_weights("sdar", seed=12))
    hub.add(
        "JetLM/SDAR-1.7B-Chat",
        {p.name: HubFile(p.read_bytes(), lfs=p.suffix == ".safetensors") for p in folder.iterdir()},
    )
    app = make_app(config=make_config(autocomplete=False))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("f2")
        screen = app.screen
        assert isinstance(screen, ModelsScreen)
        table = screen.query_one("#models", DataTable)
        table.move_cursor(row=[m.name for m in screen.models].index("smollm2-135m-instruct"))
        await pilot.press("g")  # not a block-causal checkpoint: nothing pulled
        assert screen.pulling is None
        table.move_cursor(row=[m.name for m in screen.models].index("sdar-1.7b-chat"))
        assert table.get_row("sdar-1.7b-chat")[2] == "torch"
        await pilot.press("g")
        await app.workers.wait_for_complete()
        await pilot.pause()
        bar = screen.query_one("#pull-progress", ProgressBar)
        assert (bar.total, bar.progress) == (100, 100)
        assert "ready for llama.cpp (sdar-1.7b-chat.Q8_0.gguf), checked" in str(
            screen.query_one("#pull-status").render()
        )
        assert table.get_row("sdar-1.7b-chat")[2] == "llama.cpp"
        await pilot.press("d")
        await pilot.pause()
        assert app.service.config.models.draft == "sdar-1.7b-chat"
        assert app.service.models.resolve("sdar-1.7b-chat").path.suffix == ".gguf"
