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


PRODUCT = ("app", "engines", "router", "models", "ui")


@pytest.mark.parametrize("package", PRODUCT)
def test_the_product_imports_nothing_from_training(package: str) -> None:
    """training/ stays in the checkout (it is not installed): what ships cannot need it."""
    offenders = [
        str(path.relative_to(ROOT)) for path in (ROOT / package).rglob("*.py") if "training" in imported_roots(path)
    ]
    assert offenders == []


def test_cli_start_up_imports_no_heavy_libraries() -> None:
    code = "import sys, app.cli; print(sorted(m for m in ('torch', 'textual', 'bitsandbytes') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


# app/ laid out by job (docs/architecture.md): the front ends over the service, the service over orchestration,
# orchestration over storage and the domain. A package may import those below it, never those above. Beside the
# front ends, two rooms of their own, which the front ends use and nothing below them does: the doctor (over the
# service) and recording a refinement (over storage; its frames.py, which the TUI draws from too, over nothing).
FRONT_ENDS = ("app.cli", "app.server", "ui")
BESIDE_THE_FRONT_ENDS = ("app.doctor", "app.recording")
APP_FORBIDDEN = {
    "app/domain": ("app.storage", "app.orchestration", "app.service", *BESIDE_THE_FRONT_ENDS, *FRONT_ENDS),
    "app/storage": ("app.orchestration", "app.service", *BESIDE_THE_FRONT_ENDS, *FRONT_ENDS),
    "app/orchestration": ("app.service", *BESIDE_THE_FRONT_ENDS, *FRONT_ENDS),
    "app/service.py": (*BESIDE_THE_FRONT_ENDS, *FRONT_ENDS),
    "app/errors.py": ("app.orchestration", "app.service", *BESIDE_THE_FRONT_ENDS, *FRONT_ENDS),
    "app/doctor": ("app.recording", *FRONT_ENDS),
    "app/recording": ("app.orchestration", "app.service", "app.doctor", *FRONT_ENDS),
    "app/recording/frames.py": ("app.storage", "app.orchestration", "app.service", *BESIDE_THE_FRONT_ENDS, *FRONT_ENDS),
    "app/server": ("app.cli", "ui"),
}


def imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules


@pytest.mark.parametrize("part", sorted(APP_FORBIDDEN))
def test_app_packages_import_only_those_below_them(part: str) -> None:
    where = ROOT / part
    files = [where] if where.suffix == ".py" else sorted(where.rglob("*.py"))
    assert files, f"{part} is laid out in docs/architecture.md"
    forbidden = APP_FORBIDDEN[part]
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            module
            for module in imported_modules(path)
            if any(module == f or module.startswith(f"{f}.") for f in forbidden)
        )
        for path in files
    }
    assert {file: bad for file, bad in offenders.items() if bad} == {}


def test_app_holds_only_the_service_and_its_packages() -> None:
    top = sorted(path.name for path in (ROOT / "app").iterdir() if path.suffix == ".py")
    assert top == ["__init__.py", "errors.py", "service.py"]


# No circle of imports between the product's modules, counting imports inside functions (a lazy import hides a
# circle, it does not open it); a package's __init__ and the modules inside it aside.
PRODUCT = ("app", "engines", "router", "models", "ui")


def module_names(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    names: dict[str, Path] = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Each module's imports of the others: `from a import b` is of a.b where that is a module, else of a."""
    names = module_names(root, packages)

    def module_of(name: str) -> str:
        while name and name not in names:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                imported |= {module_of(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    above = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*above, base] if base else above)
                imported |= {module_of(f"{base}.{alias.name}") for alias in node.names}
        graph[name] = {
            other
            for other in imported
            if other and other != name and not name.startswith(f"{other}.") and not other.startswith(f"{name}.")
        }
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Each import that closes a circle: `a -> b` where a module b reaches imports a again."""
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for following in graph.get(todo.pop(), set()) - seen:
                seen.add(following)
                todo.append(following)
        reach[start] = seen
    return sorted(f"{name} -> {other}" for name, others in graph.items() for other in others if name in reach[other])


def test_no_product_modules_import_each_other_in_a_circle() -> None:
    assert import_cycles(import_graph(ROOT, PRODUCT)) == []


def test_a_circle_through_a_lazy_relative_import_is_found(tmp_path: Path) -> None:
    (tmp_path / "shop" / "parts").mkdir(parents=True)
    (tmp_path / "shop" / "__init__.py").write_text("from shop.parts import till\n")
    (tmp_path / "shop" / "parts" / "__init__.py").write_text("")
    (tmp_path / "shop" / "parts" / "till.py").write_text("def total():\n    from ..stock import count\n")
    (tmp_path / "shop" / "stock.py").write_text("from shop.parts.till import total\nimport shop\n")
    graph = import_graph(tmp_path, ("shop",))
    assert graph["shop"] == set() and graph["shop.stock"] == {"shop.parts.till"}, "a package's own __init__ aside"
    assert import_cycles(graph) == ["shop.parts.till -> shop.stock", "shop.stock -> shop.parts.till"]


def test_every_room_of_app_has_its_rule() -> None:
    """A new package in app/ says where it stands (APP_FORBIDDEN); only the CLI, on top, may import anything."""
    rooms = {f"app/{path.name}" for path in (ROOT / "app").iterdir() if (path / "__init__.py").is_file()}
    assert rooms == {"app/cli"} | {part for part in APP_FORBIDDEN if not part.endswith(".py")}
