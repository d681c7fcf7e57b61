"""What `pip install` gets: the product (app, engines, models, router, ui) with the files it reads, and none of
training/, which stays in the checkout. The wheel is built here, offline and without llama.cpp."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = {"app", "engines", "models", "router", "ui"}


def _left_behind(folder: str, names: list[str]) -> set[str]:
    """Byte code, build leftovers and training runs' outputs (ignored by git): no part of a clean checkout."""
    runs = {name for name in names if Path(folder).name == "training" and name.startswith("out")}
    return runs | {name for name in names if name in ("__pycache__", "build") or name.endswith(".egg-info")}


def test_the_wheel_holds_the_product_and_no_training_code(tmp_path: Path) -> None:
    source = tmp_path / "checkout"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    packages = sorted(path.name for path in ROOT.iterdir() if (path / "__init__.py").is_file())
    assert "training" in packages, "the checkout's training/ is what the wheel must leave out"
    for name in packages:
        shutil.copytree(ROOT / name, source / name, ignore=_left_behind)
    wheels = tmp_path / "wheels"
    command = ["pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels), str(source)]
    built = subprocess.run([sys.executable, "-m", *command], cwd=tmp_path, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("sharpen-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names if ".dist-info/" not in name} == PRODUCT
    assert [name for name in names if "training" in Path(name).with_suffix("").parts] == []
    shipped = {
        "models/catalogue.toml",
        "models/embedded/sharpen-draft-lora.gguf",
        "models/embedded/sharpen-write-lora.gguf",
    }
    assert shipped <= set(names)
