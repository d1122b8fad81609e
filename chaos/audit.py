"""The Spark audit of the brokers' log dirs after a run: `minibroker audit --data-dir D --output OUT`, a subprocess.

Exit 0 means the replicas agree, 1 that the audit found anomalies (OUT/report.json says which);
anything else is a failure to audit.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLEAN, ANOMALIES, NOT_RUN, ERROR = "clean", "anomalies", "not-run", "error"


@dataclass(frozen=True)
class AuditResult:
    status: str
    detail: str
    report: str | None = None

    @property
    def failed(self) -> bool:
        return self.status in (ANOMALIES, ERROR)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "detail": self.detail, "report": self.report}


def command(data_dir: Path, output: Path) -> list[str]:
    return [sys.executable, "-m", "minibroker.cli", "audit", "--data-dir", str(data_dir), "--output", str(output)]


def run_audit(data_dir: Path | None, output: Path, required: bool, timeout: float = 900.0) -> AuditResult:
    """`required`: a cluster without log dirs on this machine is an error, not a note (--audit rather than the
    default)."""
    if data_dir is None:
        return AuditResult(ERROR if required else NOT_RUN, "the cluster has no data dir on this machine to audit")
    output.mkdir(parents=True, exist_ok=True)
    argv = command(data_dir, output)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return AuditResult(ERROR, f"{' '.join(argv)} did not finish within {timeout:g} s")
    report = output / "report.json"
    where = str(report) if report.exists() else None
    if done.returncode == 0:
        return AuditResult(CLEAN, "replicas agree", where)
    if done.returncode == 1:
        return AuditResult(ANOMALIES, f"the audit found anomalies: see {report}", where)
    tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
    return AuditResult(ERROR, f"{' '.join(argv)} exited with {done.returncode}: " + " | ".join(tail), where)
