"""The report: unavailability and throughput figures, the verdict's words, and the files it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chaos_histories import T0, clean, with_final

from chaos.audit import AuditResult
from chaos.checker import check
from chaos.history import Fault, History, Recovered
from chaos.report import longest_unavailability, summarize, throughput_split, verdict, write_report


def test_longest_unavailability_counts_the_edges_of_the_run() -> None:
    assert longest_unavailability([1.0, 2.0, 6.0], 0.0, 7.0) == (4.0, 2.0)
    assert longest_unavailability([], 0.0, 5.0) == (5.0, 0.0)
    assert longest_unavailability([0.5, 1.0], 0.0, 10.0) == (9.0, 1.0)


def test_throughput_during_and_outside_overlapping_faults() -> None:
    acks = [0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5]
    # Windows [2, 4] and [3, 5] merge into [2, 5]: 3 s with 3 acks; outside 5 s with 5 acks.
    assert throughput_split(acks, [(2.0, 4.0), (3.0, 5.0)], 0.0, 8.0) == (1.0, 1.0)
    assert throughput_split(acks, [], 0.0, 8.0) == (None, 1.0)


def _recovered_clean() -> History:
    history = clean()
    history.faults = [Fault("kill-leader", "broker-1", T0 + 0.15, T0 + 0.35),
                      Fault("bounce", "broker-2", T0 + 2, T0 + 3)]
    history.recovered = Recovered(T0 + 7, True, "full ISR on every partition")
    return history


def test_summary_and_verdict_of_a_clean_run() -> None:
    history = _recovered_clean()
    summary = summarize(history, check(history), None)
    assert summary["valid"]
    assert summary["faults"] == {"kill-leader": 1, "bounce": 1}
    assert summary["acked"] == 5 and summary["lost"] == 0 and summary["duplicated"] == 0
    # The run ends at 6 s; w0's last ack is at 0.21 s, w1's at 0.41 s.
    assert summary["longest_writer_unavailability"] == {"writer": "w0", "s": 5.79, "at_s": 0.21}
    assert summary["longest_unavailability_s"] == 5.59
    text = verdict(summary)
    assert "VERDICT: every safety check held" in text
    assert "faults injected      bounce 1, kill-leader 1" in text
    assert "lost-write             ok" in text
    assert len(text.splitlines()) < 30  # one screen


def test_verdict_names_what_failed() -> None:
    history = with_final(_recovered_clean(), 0, ((0, "w0-0"), (1, "w0-2")))
    summary = summarize(history, check(history), None)
    assert not summary["valid"]
    assert summary["lost"] == 1
    text = verdict(summary)
    assert "lost-write             FAIL (1)" in text
    assert "VERDICT: SAFETY VIOLATED" in text


@pytest.mark.parametrize(("audit", "valid", "word"), [
    (AuditResult("clean", "replicas agree"), True, "ok"),
    (AuditResult("anomalies", "diverged"), False, "FAIL"),
    (AuditResult("not-run", "the cluster has no data dir on this machine to audit"), True, "NOT RUN"),
])
def test_audit_in_the_verdict(audit: AuditResult, valid: bool, word: str) -> None:
    history = _recovered_clean()
    summary = summarize(history, check(history), audit)
    assert summary["valid"] is valid
    assert f"audit                  {word} ({audit.detail})" in verdict(summary)


def test_no_full_isr_fails_the_run() -> None:
    history = _recovered_clean()
    history.recovered = Recovered(T0 + 7, False, "no full ISR after 90 s")
    summary = summarize(history, check(history), None)
    assert not summary["valid"]
    assert "full-isr               FAIL (no full ISR after 90 s)" in verdict(summary)


def test_write_report_files(tmp_path: Path) -> None:
    history = _recovered_clean()
    summary = write_report(tmp_path, history, check(history), None)
    assert json.loads((tmp_path / "result.json").read_text()) == json.loads(json.dumps(summary))
    assert (tmp_path / "chaos.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (tmp_path / "chaos.html").read_text()
    assert "data:image/png;base64," in page and "every safety check held" in page
