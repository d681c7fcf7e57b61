"""Doctor's look at the model stores Sharpen reads (Ollama's, LM Studio's folders, models.folders, the HF
cache): where each is, the models found there and what they run as, and what was skipped and why."""

from __future__ import annotations

from app.doctor.report import Finding
from app.orchestration.model_manager import ModelManager
from models.found.architectures import GGUF_ARCHITECTURES, known_architectures, llama_library
from models.found.stores import STORE_LABELS, StoreContents


def check_stores(models: ModelManager) -> list[Finding]:
    stores = models.found.stores()
    findings = [_store_finding(contents) for contents in stores if contents.scan.exists]
    absent = [f"{STORE_LABELS[c.scan.store]} {c.scan.root}" for c in stores if not c.scan.exists]
    if absent:
        findings.append(Finding("stores", "ok", f"not on this machine: {'; '.join(absent)}", "", {"absent": absent}))
    findings.append(_architectures_finding())
    return findings


def _store_finding(contents: StoreContents) -> Finding:
    scan = contents.scan
    runs = [f"{m.name} ({m.verdict.label})" for m in contents.models if m.verdict.runs_as]
    cannot = [f"{m.name} (cannot run: {m.verdict.reason})" for m in contents.models if not m.verdict.runs_as]
    skipped = [f"{item.where} ({item.why})" for item in contents.skipped]
    parts = [f"{len(runs)} runnable" + (f": {', '.join(runs)}" if runs else "")]
    parts += [f"not runnable: {', '.join(cannot)}"] if cannot else []
    parts += [f"skipped: {', '.join(skipped)}"] if skipped else []
    facts = {
        "root": str(scan.root),
        "models": [model.as_json() for model in contents.models],
        "skipped": [{"where": item.where, "why": item.why} for item in contents.skipped],
    }
    return Finding(f"store: {STORE_LABELS[scan.store]}", "ok", f"{scan.root}: {'; '.join(parts)}", "", facts)


def _architectures_finding() -> Finding:
    library = llama_library()
    if library is None:
        return Finding(
            "architectures",
            "warn",
            "llama.cpp's library was not found: found models' architectures are not checked before they load",
        )
    known = known_architectures()
    detail = (
        f"{library.name} knows {len(known)} of the gguf package's {len(GGUF_ARCHITECTURES)} architectures "
        "(read from the library's strings)"
    )
    return Finding("architectures", "ok", detail, "", {"library": str(library), "known": known})
