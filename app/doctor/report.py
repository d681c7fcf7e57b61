"""What `sharpen doctor` reports: each check's Finding (ok, warn: works, but worse than it could; fail: the
editor would not work) with the one command that fixes it, as lines for a person or as JSON for a bug report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str = ""
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        """False when something would stop the editor from working."""
        return all(f.status != "fail" for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "findings": [asdict(f) for f in self.findings]}


def render(report: Report) -> str:
    lines = []
    for finding in report.findings:
        lines.append(f"{finding.status.upper():5} {finding.check:16} {finding.detail}")
        if finding.fix and finding.status != "ok":
            lines.append(f"{'':5} {'':16} fix: {finding.fix}")
    verdict = "ready" if report.ok else "something stops the editor from working: see FAIL above"
    lines.append(f"\nsharpen doctor: {verdict}")
    return "\n".join(lines) + "\n"
