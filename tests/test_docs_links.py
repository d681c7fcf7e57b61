"""The docs stay true to the tree: every relative link in README.md, docs/ and training/ points at a file in the
repository (and at a heading of it, for a #anchor), and docs/architecture.md's file paths and its path of a draft
name files and functions that exist."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "training").glob("*.md")])
ARCHITECTURE = ROOT / "docs" / "architecture.md"
TOP_LEVEL = ("app", "engines", "router", "models", "ui", "training", "tests", "scripts", "bench", "docs")

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`[^`]*`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
# `path/file.py` `Name` or `path/file.py` `Class.method`: a step of the path of a draft.
FILE_AND_SYMBOL = re.compile(r"`((?:[\w-]+/)+[\w-]+\.py)` `([A-Za-z_][\w.]*)`")
PATH = re.compile(r"`((?:" + "|".join(TOP_LEVEL) + r")/[\w./-]*)`")
CALL = re.compile(r"`([A-Za-z_][\w.]*)\(\)`")


def prose_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The file's lines outside fenced code blocks, numbered from 1."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text lowercased, punctuation but hyphens and underscores
    dropped, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(path):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> Iterator[tuple[int, str]]:
    for number, line in prose_lines(path):
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            yield number, match.group(1)


def link_problem(source: Path, target: str) -> str | None:
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
        return None
    file_part, _, anchor = target.partition("#")
    resolved = (source.parent / file_part).resolve() if file_part else source
    if not resolved.is_relative_to(ROOT):
        return "points outside the repository"
    if not resolved.exists():
        return "no such file"
    if anchor:
        if resolved.suffix != ".md":
            return "an anchor into a file that is not markdown"
        if anchor not in anchors(resolved):
            return f"no heading #{anchor} in {resolved.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    problems = [
        f"{doc.relative_to(ROOT)}:{number}: {target}: {problem}"
        for number, target in links(doc)
        if (problem := link_problem(doc, target)) is not None
    ]
    assert not problems, "\n".join(problems)


def test_the_docs_are_checked() -> None:
    names = {str(path.relative_to(ROOT)) for path in DOCS}
    assert {"README.md", "docs/architecture.md", "docs/embedded-model.md", "training/NOTES.md"} <= names
    assert sum(1 for doc in DOCS for _ in links(doc)) > 50


def test_slugs_follow_github() -> None:
    vulkan = "vulkan-on-mesas-cpu-driver-scriptscheck-vulkan"
    assert slug("Vulkan on Mesa's CPU driver (`scripts/check-vulkan`)") == vulkan
    assert slug("Block-causal decoding (`diffusion.cache = block`)") == "block-causal-decoding-diffusioncache--block"
    assert slug("Drafts into a document: what was asked (`bench/faithful_drafts.py`)") == (
        "drafts-into-a-document-what-was-asked-benchfaithful_draftspy"
    )


def test_a_broken_link_is_caught() -> None:
    page = ROOT / "docs" / "architecture.md"
    assert link_problem(page, "no-such-page.md") == "no such file"
    assert link_problem(page, "routing.md#no-such-heading") is not None
    assert link_problem(page, "../../outside.md") == "points outside the repository"
    assert link_problem(page, "routing.md#calibration") is None


def defines(source: str, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b", source, re.MULTILINE) is not None


def symbol_problem(file: str, symbol: str) -> str | None:
    path = ROOT / file
    if not path.is_file():
        return f"{file} does not exist"
    source = path.read_text(encoding="utf-8")
    *owner, name = symbol.split(".")
    if owner:
        class_match = re.search(rf"^class\s+{re.escape(owner[-1])}\b", source, re.MULTILINE)
        if class_match is None:
            return f"{file} has no class {owner[-1]}"
        # The method must be defined after its class starts (and before the next top-level class).
        body = source[class_match.end() :]
        next_class = re.search(r"^class\s", body, re.MULTILINE)
        body = body[: next_class.start()] if next_class else body
        return None if defines(body, name) else f"{file}: {owner[-1]} has no method {name}"
    return None if defines(source, name) else f"{file} defines no {name}"


def architecture_lines() -> list[str]:
    return [line for _, line in prose_lines(ARCHITECTURE)]


def test_the_path_of_a_draft_names_files_and_functions_that_exist() -> None:
    text = "\n".join(architecture_lines())
    section = text.split("## The path of a draft", 1)[1].split("\n## ", 1)[0]
    steps = FILE_AND_SYMBOL.findall(section)
    assert len(steps) >= 15, "each step names `file.py` `function`"
    problems = [problem for file, symbol in steps if (problem := symbol_problem(file, symbol)) is not None]
    assert not problems, "\n".join(problems)


def test_architecture_paths_exist() -> None:
    paths = {match for line in architecture_lines() for match in PATH.findall(line)}
    assert len(paths) >= 20
    missing = sorted(path for path in paths if not (ROOT / path).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_architecture_calls_exist() -> None:
    product = [path for top in TOP_LEVEL[:6] for path in (ROOT / top).rglob("*.py")]
    sources = [path.read_text(encoding="utf-8") for path in product]
    calls = {match for line in architecture_lines() for match in CALL.findall(line)}
    missing = sorted(call for call in calls if not any(defines(source, call.split(".")[-1]) for source in sources))
    assert not missing, f"docs/architecture.md names functions that do not exist: {missing}"


def test_a_wrong_step_is_caught() -> None:
    assert symbol_problem("app/service.py", "SharpenService.draft") is None
    assert symbol_problem("app/service.py", "SharpenService.no_such_method") is not None
    assert symbol_problem("app/service.py", "NoSuchClass.draft") is not None
    assert symbol_problem("app/no_such_file.py", "draft") is not None
    assert symbol_problem("router/policy.py", "decide") is None
