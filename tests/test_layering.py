"""The house rules about who may import what (docs/architecture.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "engines": {"textual", "app", "ui", "router"},
    "models": {"textual", "app", "ui", "router", "engines"},
    "router": {"textual", "app", "ui"},
    "ui": {"llama_cpp", "torch", "transformers", "bitsandbytes", "accelerate"},
}


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_respect_the_layers(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & FORBIDDEN[package])
        for path in (ROOT / package).rglob("*.py")
    }
    assert {file: bad for file, bad in offenders.items() if bad} == {}


def test_cli_start_up_imports_no_heavy_libraries() -> None:
    code = "import sys, app.cli; print(sorted(m for m in ('torch', 'textual', 'bitsandbytes') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"
