"""F2 lists the models found in Ollama's store and LM Studio's folder below the catalogue, and selects them."""

from __future__ import annotations

import os
from pathlib import Path

from textual.widgets import DataTable, Label
from tool_stores import add_lmstudio_model, add_ollama_model, write_vision_projector
from ui_support import AppFactory, make_config

from app.storage.paths import sharpen_paths
from ui.screens.models import ModelsScreen

PROJECTOR = "acme/vision-GGUF/mmproj-f16.gguf"


async def test_f2_lists_found_models_and_uses_one(
    make_app: AppFactory, embedded_model_path: Path, tmp_path: Path
) -> None:
    add_ollama_model(Path(os.environ["OLLAMA_MODELS"]), "smollm2", "135m", embedded_model_path)
    projector = write_vision_projector(tmp_path / "mmproj-f16.gguf")
    add_lmstudio_model(Path.home() / ".lmstudio" / "models", "acme", "vision-GGUF", projector, "mmproj-f16.gguf")
    app = make_app(config=make_config(autocomplete=False))
    async with app.run_test(size=(110, 34)) as pilot:
        await pilot.press("f2")
        screen = app.screen
        assert isinstance(screen, ModelsScreen)
        table = screen.query_one("#models", DataTable)
        size = f"{embedded_model_path.stat().st_size / 1e6:,.0f} MB"
        assert table.get_row("smollm2:135m") == ["smollm2:135m", "AR", "Ollama", size, "", ""]
        assert table.get_row(PROJECTOR)[1:3] == ["cannot run", "LM Studio"]
        rows = [str(key.value) for key in table.rows]
        table.move_cursor(row=rows.index(PROJECTOR))
        await pilot.pause()
        detail = str(screen.query_one("#found-detail", Label).render())
        assert "LM Studio: clip" in detail and "a vision projector (mmproj)" in detail
        await pilot.press("c")
        await pilot.pause()
        assert app.screen is screen, "a model that cannot run is not chosen"
        assert any("cannot run: a vision projector" in n.message for n in app._notifications)
        table.move_cursor(row=rows.index("smollm2:135m"))
        await pilot.pause()
        assert "Ollama: llama, Q4_1, context 8,192" in str(screen.query_one("#found-detail", Label).render())
        await pilot.press("c")
        await pilot.pause()
        assert app.service.config.models.complete == "smollm2:135m"
        assert 'complete = "smollm2:135m"' in sharpen_paths().config_file.read_text()
        assert app.service.engines.ar().model_name == "smollm2:135m"
