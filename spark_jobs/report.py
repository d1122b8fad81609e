"""What the audit says: per-partition summaries, the stdout table, report.json and anomalies.parquet.

report.json is a contract (the chaos tooling reads it): see docs/audit.md
("Auditing the logs with Spark") for its shape, and bump REPORT_VERSION on any
change that is not an added field.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark_jobs.checks import Finding, Replica, transactions_of
from spark_jobs.files import Location

REPORT_VERSION = 1
REPORT_FILE = "report.json"
ANOMALIES_FILE = "anomalies.parquet"

# One row per partition (and one, topic null, for the log dirs' own files), as the Spark job returns it.
SUMMARY_SCHEMA = (
    "topic string, partition int, replicas array<int>, log_start_offset long, log_end_offset long,"
    " high_watermark long, batches long, records long, bytes long,"
    " findings array<struct<check: string, topic: string, partition: int, broker: int, log_dir: string,"
    " file: string, position: long, base_offset: long, last_offset: long, detail: string>>,"
    " open_transactions array<struct<producer_id: long, first_offset: long>>"
)


@dataclass
class PartitionSummary:
    """A partition as the table shows it: its replicas, offsets, size (of its longest replica) and findings."""

    topic: str | None
    partition: int | None
    replicas: list[int] = field(default_factory=list)
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    high_watermark: int | None = None
    batches: int = 0
    records: int = 0
    bytes: int = 0
    findings: list[Finding] = field(default_factory=list)
    # Transactions open at the end of the longest replica (no marker yet): reported, not anomalies.
    open_transactions: list[dict[str, int]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "ok" if not self.findings else f"{len(self.findings)} anomalies"


def summarize(replicas: Sequence[Replica], findings: Sequence[Finding]) -> PartitionSummary:
    """The summary row of one partition's replicas (log-dir rows, topic None, give only findings)."""
    first = replicas[0] if replicas else None
    summary = PartitionSummary(first.topic if first else None, first.partition if first else None,
                               findings=list(findings))
    holders = [r for r in replicas if r.topic is not None]
    if not holders:
        return summary
    summary.replicas = sorted(r.broker for r in holders if r.broker is not None)
    longest = max(holders, key=lambda r: r.log_end)
    whole = longest.whole_batches
    summary.log_start_offset = min(r.log_start for r in holders)
    summary.log_end_offset = longest.log_end
    summary.high_watermark = max((r.high_watermark for r in holders if r.high_watermark is not None), default=None)
    summary.batches = len(whole)
    summary.records = sum(b.record_count or 0 for b in whole)
    summary.bytes = sum(b.size or 0 for b in whole)
    summary.open_transactions = [{"producer_id": producer_id, "first_offset": first}
                                 for producer_id, first in sorted(transactions_of(longest).open.items(),
                                                                  key=lambda t: t[1])]
    return summary


def summary_row(summary: PartitionSummary) -> dict[str, Any]:
    row = asdict(summary)
    row["findings"] = [f._asdict() for f in summary.findings]
    return row


def from_row(row: dict[str, Any]) -> PartitionSummary:
    return PartitionSummary(**{**row, "findings": [Finding(**f) for f in row["findings"]]})


# --------------------------------------------------------------------------- output


def _offsets(s: PartitionSummary) -> str:
    return "-" if s.log_end_offset is None else f"{s.log_start_offset}..{s.log_end_offset}"


def format_table(summaries: Sequence[PartitionSummary]) -> str:
    """The human summary: one line per partition, then one per anomaly."""
    header = ("TOPIC-PARTITION", "REPLICAS", "OFFSETS", "RECORDS", "BYTES", "HW", "STATUS")
    rows = [header]
    for s in summaries:
        if s.topic is None:
            continue
        rows.append((f"{s.topic}-{s.partition}", ",".join(map(str, s.replicas)), _offsets(s), str(s.records),
                     str(s.bytes), "-" if s.high_watermark is None else str(s.high_watermark), s.status))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    still_open = [(s, t) for s in summaries for t in s.open_transactions]
    if still_open:
        lines += ["", "Open transactions (no marker yet; not anomalies):"]
        lines += [f"  {s.topic}-{s.partition}: producerId {t['producer_id']} from offset {t['first_offset']}"
                  for s, t in still_open]
    findings = [f for s in summaries for f in s.findings]
    if findings:
        lines += ["", f"{len(findings)} anomalies:"]
        for f in findings:
            where = ", ".join(part for part in (
                f"broker {f.broker}" if f.broker is not None else f.log_dir,
                f"{f.topic}-{f.partition}" if f.topic is not None else None,
                f.file, None if f.position is None else f"position {f.position}",
                None if f.base_offset is None else f"offsets {f.base_offset}..{f.last_offset}",
            ) if part)
            lines.append(f"  [{f.check}] {where}: {f.detail}")
    else:
        lines += ["", "No anomalies."]
    return "\n".join(lines)


def report_json(summaries: Sequence[PartitionSummary], log_dirs: Sequence[str], brokers: Sequence[int | None],
                elapsed_s: float) -> dict[str, Any]:
    findings = [f for s in summaries for f in s.findings]
    partitions = [s for s in summaries if s.topic is not None]
    return {
        "version": REPORT_VERSION,
        "status": "anomalies" if findings else "clean",
        "log_dirs": list(log_dirs),
        "brokers": sorted({b for b in brokers if b is not None}),
        "elapsed_s": round(elapsed_s, 3),
        "totals": {
            "partitions": len(partitions),
            "batches": sum(s.batches for s in partitions),
            "records": sum(s.records for s in partitions),
            "bytes": sum(s.bytes for s in partitions),
            "anomalies": len(findings),
            "by_check": dict(sorted(Counter(f.check for f in findings).items())),
        },
        "partitions": [{
            "topic": s.topic, "partition": s.partition, "replicas": s.replicas,
            "log_start_offset": s.log_start_offset, "log_end_offset": s.log_end_offset,
            "high_watermark": s.high_watermark, "batches": s.batches, "records": s.records, "bytes": s.bytes,
            "status": "ok" if not s.findings else "anomalies", "anomalies": len(s.findings),
            "open_transactions": s.open_transactions,
        } for s in partitions],
        "anomalies": [f._asdict() for f in findings],
    }


def write_outputs(output: Location, report: dict[str, Any], findings: Sequence[Finding]) -> None:
    """OUT/report.json and OUT/anomalies.parquet (an empty table when clean, so readers need no special case)."""
    filesystem, path = output.filesystem()
    filesystem.create_dir(path, recursive=True)
    with filesystem.open_output_stream(output.child(REPORT_FILE).filesystem()[1]) as out:
        out.write((json.dumps(report, indent=2) + "\n").encode())
    schema = pa.schema([
        ("check", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("broker", pa.int32()),
        ("log_dir", pa.string()), ("file", pa.string()), ("position", pa.int64()), ("base_offset", pa.int64()),
        ("last_offset", pa.int64()), ("detail", pa.string()),
    ])
    table = pa.Table.from_pylist([f._asdict() for f in findings], schema=schema)
    pq.write_table(table, output.child(ANOMALIES_FILE).filesystem()[1], filesystem=filesystem)
