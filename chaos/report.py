"""The outcome of a chaos run: result.json, a one-screen verdict, and a Jepsen-style picture (PNG and HTML).

summarize() is pure (history + checks in, a JSON-ready dict out); verdict() renders it as text;
plot() draws throughput and latency over time with the fault windows shaded, one colour per kind.
"""

from __future__ import annotations

import base64
import html
import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

from chaos.audit import AuditResult
from chaos.checker import FAILING, CheckResult
from chaos.history import FAIL, INFO, OK, History, Send
from chaos.txn_checker import TXN_FAILING

RESULT_FILE = "result.json"
PNG_FILE = "chaos.png"
HTML_FILE = "chaos.html"
_FAULT_COLOURS = {"kill-leader": "#d62728", "kill-controller": "#9467bd", "kill-random": "#8c564b",
                  "pause-leader": "#ff7f0e", "pause-controller": "#e377c2", "partition-leader": "#17becf",
                  "bounce": "#bcbd22", "kill-coordinator": "#e6550d", "kill-zookeeper": "#393b79",
                  "pause-zookeeper": "#aec7e8", "expire-session": "#8c6d31"}


def _span(history: History) -> tuple[float, float]:
    """The writing phase: from the run's start to when the writers stopped (or the last send, for old files)."""
    start = float(history.meta.get("start", min((s.invoke for s in history.sends), default=0.0)))
    end = float(history.meta.get("end", max((s.complete for s in history.sends), default=start)))
    return start, max(end, start)


def _merged(windows: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for start, end in sorted(windows):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def longest_unavailability(acks: list[float], start: float, end: float) -> tuple[float, float]:
    """The longest stretch of the writing phase without an acknowledgement: (seconds, offset from start)."""
    points = [start, *sorted(t for t in acks if start <= t <= end), end]
    gap, at = 0.0, 0.0
    for a, b in itertools.pairwise(points):
        if b - a > gap:
            gap, at = b - a, a - start
    return gap, at


def throughput_split(acks: list[float], windows: list[tuple[float, float]], start: float,
                     end: float) -> tuple[float | None, float | None]:
    """Acknowledgements per second during fault windows and outside them (None where there is no such time)."""
    merged = [(max(a, start), min(b, end)) for a, b in _merged(windows) if b > start and a < end]
    during_s = sum(b - a for a, b in merged)
    inside = sum(1 for t in acks if any(a <= t <= b for a, b in merged))
    outside_n = sum(1 for t in acks if start <= t <= end) - inside
    outside_s = (end - start) - during_s
    return (inside / during_s if during_s > 0 else None, outside_n / outside_s if outside_s > 0 else None)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize(history: History, check: CheckResult, audit: AuditResult | None) -> dict[str, Any]:
    start, end = _span(history)
    idempotent = [s for s in history.sends if s.acks == "all"]
    acks = [s.complete for s in idempotent if s.outcome == OK]
    windows = [(f.start, f.end) for f in history.faults]
    gap, gap_at = longest_unavailability(acks, start, end)
    # One producer can stall while the others go on (a client waiting on a dead leader): per writer too.
    by_writer: dict[str, list[float]] = {}
    for s in idempotent:
        by_writer.setdefault(s.process, [])
        if s.outcome == OK:
            by_writer[s.process].append(s.complete)
    writer_gaps = {w: longest_unavailability(times, start, end) for w, times in sorted(by_writer.items())}
    worst = max(writer_gaps.items(), key=lambda item: item[1][0], default=None)
    during, outside = throughput_split(acks, windows, start, end)
    latencies = [(s.complete - s.invoke) * 1000 for s in idempotent if s.outcome == OK]
    recovered = history.recovered
    checks = {"checker": check.valid, "full-isr": recovered is not None and recovered.full_isr}
    if audit is not None:
        checks["audit"] = not audit.failed
    return {
        "valid": all(checks.values()),
        "checks": checks,
        "seed": history.meta.get("seed"),
        # Histories from before --client were all written with minibroker's own client.
        "client": history.meta.get("client", "minibroker"),
        "duration_s": round(end - start, 1),
        "faults": dict(Counter(f.fault for f in history.faults)),
        "fault_windows": [{"fault": f.fault, "target": f.target, "start_s": round(f.start - start, 2),
                           "end_s": round(f.end - start, 2)} for f in history.faults],
        "acked": len(acks),
        "sends": check.sends,
        "lost": check.counts.get("lost-write", 0),
        "duplicated": check.counts.get("duplicate", 0),
        "anomalies": check.to_json()["anomalies"],
        "examples": check.examples,
        "acks1": {"sends": check.acks1_sends, "lost": check.counts.get("acks1-lost", 0),
                  "duplicated": check.counts.get("acks1-duplicate", 0)},
        "longest_unavailability_s": round(gap, 2),
        "longest_unavailability_at_s": round(gap_at, 2),
        "longest_writer_unavailability": None if worst is None else {
            "writer": worst[0], "s": round(worst[1][0], 2), "at_s": round(worst[1][1], 2)},
        "throughput_during_faults": None if during is None else round(during, 1),
        "throughput_outside_faults": None if outside is None else round(outside, 1),
        "latency_ms": {"p50": _round(_percentile(latencies, 0.5)), "p99": _round(_percentile(latencies, 0.99)),
                       "max": _round(max(latencies, default=None))},
        "final_records": check.final_records,
        "polled_records": check.polled_records,
        "group": _group_summary(history),
        "transactions": _txn_summary(history),
        "recovery": None if recovered is None else {"full_isr": recovered.full_isr, "detail": recovered.detail},
        "audit": None if audit is None else audit.to_json(),
        "notes": check.notes + list(history.meta.get("notes", [])),
        "errors": list(history.meta.get("errors", [])),
    }


def _group_summary(history: History) -> dict[str, Any] | None:
    """The consumer group's side of the run, when it had one: its members, commits and rebalances."""
    if not history.commits and not history.group_polls:
        return None
    return {"group": history.meta.get("group"), "members": history.meta.get("group_members"),
            "commits": dict(Counter(c.outcome for c in history.commits)),
            "polled_records": sum(len(p.records) for p in history.group_polls),
            "assignments": sum(1 for a in history.assignments if a.event == "assigned")}


def _txn_summary(history: History) -> dict[str, Any] | None:
    """The transactional processors' side of the run, when it had them: their transactions' outcomes."""
    if not history.txns and not history.meta.get("txn_processors"):
        return None
    return {"group": history.meta.get("txn_group"), "processors": history.meta.get("txn_processors"),
            "transactions": dict(Counter(t.outcome for t in history.txns)),
            "records": sum(len(t.inputs) for t in history.txns if t.outcome == OK)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def verdict(summary: dict[str, Any]) -> str:
    """One screen: what was done to the cluster, what the clients saw, and whether every safety check held."""
    faults = ", ".join(f"{kind} {n}" for kind, n in sorted(summary["faults"].items())) or "none"
    sends = summary["sends"]
    acks1 = summary["acks1"]
    lines = [
        f"chaos run: {summary['duration_s']:g} s, seed {summary['seed']}, {summary['client']} clients",
        f"  faults injected      {faults}",
        f"  sends (acks=all)     {sends.get(OK, 0)} acknowledged, {sends.get(FAIL, 0)} failed,"
        f" {sends.get(INFO, 0)} unknown",
        f"  lost                 {summary['lost']}",
        f"  duplicated           {summary['duplicated']}",
        f"  longest unavailable  {summary['longest_unavailability_s']:g} s"
        f" (from {summary['longest_unavailability_at_s']:g} s){_worst_writer(summary)}",
        f"  throughput (acks/s)  {_rate(summary['throughput_during_faults'])} during faults,"
        f" {_rate(summary['throughput_outside_faults'])} outside",
        f"  latency (ms)         p50 {summary['latency_ms']['p50']}, p99 {summary['latency_ms']['p99']},"
        f" max {summary['latency_ms']['max']}",
        f"  acks=1 writer        {acks1['sends'].get(OK, 0)} acknowledged, {acks1['lost']} lost,"
        f" {acks1['duplicated']} duplicated (reported, not failed)",
    ]
    group = summary.get("group")
    if group:
        commits = group["commits"]
        lines.append(f"  consumer group       {group['group']}: {group['members']} members,"
                     f" {group['polled_records']} records, {commits.get(OK, 0)} commits acknowledged"
                     f" ({commits.get(FAIL, 0)} failed, {commits.get(INFO, 0)} unknown),"
                     f" {group['assignments']} assignments")
    transactions = summary.get("transactions")
    if transactions:
        outcomes = transactions["transactions"]
        lines.append(f"  transactions         {transactions['processors']} processors: {outcomes.get(OK, 0)} committed"
                     f" ({transactions['records']} records), {outcomes.get(FAIL, 0)} aborted,"
                     f" {outcomes.get(INFO, 0)} unknown")
    lines.append("  checks")
    anomalies = summary["anomalies"]
    for name in FAILING:
        if name in TXN_FAILING and not transactions:
            continue  # no transactional workload in this run
        count = anomalies.get(name, 0)
        lines.append(f"    {name:<22} {'ok' if count == 0 else f'FAIL ({count})'}")
    recovery = summary["recovery"]
    lines.append(f"    {'full-isr':<22} {'ok' if summary['checks']['full-isr'] else 'FAIL'}"
                 + ("" if recovery is None else f" ({recovery['detail']})"))
    audit = summary["audit"]
    if audit is not None:
        state = {"clean": "ok", "anomalies": "FAIL", "error": "FAIL", "not-run": "NOT RUN"}[audit["status"]]
        lines.append(f"    {'audit':<22} {state} ({audit['detail']})")
    for note in summary["notes"] + summary["errors"]:
        lines.append(f"  note: {note}")
    lines.append("VERDICT: " + ("every safety check held" if summary["valid"] else "SAFETY VIOLATED or not verified"))
    return "\n".join(lines)


def _worst_writer(summary: dict[str, Any]) -> str:
    worst = summary.get("longest_writer_unavailability")
    if not worst:
        return ""
    return f"; one writer: {worst['s']:g} s ({worst['writer']} from {worst['at_s']:g} s)"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def plot(history: History, path: Path) -> None:
    """Throughput (acks per second, failures and unknowns) and latency over time; fault windows shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    start, end = _span(history)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 7), sharex=True)
    # acks=1 first: the acks=all points are drawn over it.
    series: dict[str, list[Send]] = {"acks=1 ok": [], "ok": [], "fail/unknown": []}
    for s in history.sends:
        key = ("ok" if s.outcome == OK else "fail/unknown") if s.acks == "all" else ("acks=1 ok" if s.outcome == OK
                                                                                      else "")
        if key:
            series[key].append(s)
    colours = {"ok": "#1f77b4", "fail/unknown": "#d62728", "acks=1 ok": "#2ca02c"}
    seconds = max(int(end - start) + 1, 1)
    for name, sends in series.items():
        counts = [0] * seconds
        for s in sends:
            bucket = int(s.complete - start)
            if 0 <= bucket < seconds:
                counts[bucket] += 1
        top.step(range(seconds), counts, where="post", label=name, color=colours[name], linewidth=1)
        if sends:
            bottom.scatter([s.complete - start for s in sends], [(s.complete - s.invoke) * 1000 for s in sends],
                           s=2, alpha=0.4, color=colours[name], label=name)
    top.set_ylabel("sends completed / s")
    bottom.set_ylabel("latency (ms)")
    bottom.set_yscale("log")
    bottom.set_xlabel("seconds since start")
    kinds = set()
    for fault in history.faults:
        colour = _FAULT_COLOURS.get(fault.fault, "#7f7f7f")
        kinds.add(fault.fault)
        for ax in (top, bottom):
            ax.axvspan(fault.start - start, max(fault.end - start, fault.start - start + 0.2), color=colour,
                       alpha=0.18, linewidth=0)
        top.annotate(fault.target, (fault.start - start, 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                     va="top", rotation=90, color=colour)
    handles, labels = top.get_legend_handles_labels()
    handles += [Patch(color=_FAULT_COLOURS.get(k, "#7f7f7f"), alpha=0.3) for k in sorted(kinds)]
    labels += sorted(kinds)
    top.legend(handles, labels, loc="upper right", fontsize=8)
    top.set_title(f"minibroker chaos: topic {history.meta.get('topic', '?')}, seed {history.meta.get('seed', '?')}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_html(summary: dict[str, Any], png: Path, path: Path) -> None:
    """A self-contained page: the picture inline, the verdict, the JSON result."""
    image = base64.b64encode(png.read_bytes()).decode()
    path.write_text(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>minibroker chaos</title></head><body>\n"
        f"<img alt=\"throughput and latency over time, fault windows shaded\" src=\"data:image/png;base64,{image}\">\n"
        f"<pre>{html.escape(verdict(summary))}</pre>\n"
        f"<details><summary>result.json</summary><pre>{html.escape(json.dumps(summary, indent=2))}</pre></details>\n"
        "</body></html>\n")


def write_report(output: Path, history: History, check: CheckResult, audit: AuditResult | None) -> dict[str, Any]:
    """result.json, chaos.png and chaos.html in `output`; returns the summary."""
    output.mkdir(parents=True, exist_ok=True)
    summary = summarize(history, check, audit)
    (output / RESULT_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    plot(history, output / PNG_FILE)
    write_html(summary, output / PNG_FILE, output / HTML_FILE)
    return summary
