"""`minibroker chaos` without a cluster: refusals before anything starts, `chaos check` on recorded histories,
and how the audit step reads the audit command's exit code."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from chaos_histories import T0, clean, with_final

from chaos import audit
from chaos.history import History, HistoryWriter, Recovered
from local_cluster import network as cluster_network
from minibroker.cli import main


def _record(history: History, path: Path) -> Path:
    history.recovered = Recovered(T0 + 7, True, "full ISR")
    writer = HistoryWriter(path)
    writer.meta(**history.meta)
    for event in [*history.sends, *history.polls, *history.final_reads, history.recovered]:
        writer.write(event)
    writer.close()
    return path


def test_partition_faults_need_netns(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # As a user without CAP_NET_ADMIN, whoever runs the test.
    monkeypatch.setattr(cluster_network, "missing_capabilities", lambda proc_status: ["CAP_NET_ADMIN"])
    assert main(["chaos", "run", "--faults", "kill-leader,partition-leader", "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "partition-leader needs network namespaces: a cluster started with `minibroker cluster up --netns`" in err
    assert not (tmp_path / "out").exists()  # refused before any cluster started


def test_a_consumer_group_needs_a_client_with_a_group_member_and_kill_coordinator_a_group(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["chaos", "run", "--faults", "kill-coordinator", "--client", "confluent-kafka", "--output",
                 str(out)]) == 2
    assert "kill-coordinator kills the broker coordinating the workload's consumer group: give --group-members N" \
        in capsys.readouterr().err
    assert main(["chaos", "run", "--group-members", "2", "--client", "kafka-python", "--output", str(out)]) == 2
    assert "--client kafka-python has no group consumer in the chaos workload yet" in capsys.readouterr().err
    assert main(["chaos", "run", "--group-members", "-1", "--output", str(out)]) == 2
    assert "--readers and --group-members at least 0" in capsys.readouterr().err
    assert not out.exists()  # refused before any cluster started


def test_bad_options_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "run", "--interval", "30s", "--duration", "10s", "--output", str(tmp_path)]) == 2
    assert "--interval (30 s) is longer than --duration (10 s)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["chaos", "run", "--faults", "kill-all"])
    assert exit_info.value.code == 2
    assert "unknown fault kill-all" in capsys.readouterr().err


def test_check_a_clean_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _record(clean(), tmp_path / "history.jsonl")
    assert main(["chaos", "check", str(path), "--output", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert "VERDICT: every safety check held" in out
    assert (tmp_path / "report" / "chaos.png").exists() and (tmp_path / "report" / "result.json").exists()


def test_check_a_history_with_a_lost_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _record(with_final(clean(), 1, ((0, "w0-1"), (2, "a1-0"))), tmp_path / "history.jsonl")
    assert main(["chaos", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "lost-write             FAIL (1)" in out and "SAFETY VIOLATED" in out


def test_check_a_missing_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "check", str(tmp_path / "nope.jsonl")]) == 2
    assert "cannot read history" in capsys.readouterr().err


def test_audit_without_log_dirs_on_this_machine(tmp_path: Path) -> None:
    assert audit.run_audit(None, tmp_path / "a", required=False) == audit.AuditResult(
        "not-run", "the cluster has no data dir on this machine to audit")
    assert audit.run_audit(None, tmp_path / "a", required=True).status == "error"


@pytest.mark.parametrize(("code", "status"), [(0, "clean"), (1, "anomalies"), (3, "error")])
def test_audit_exit_codes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, code: int, status: str) -> None:
    monkeypatch.setattr(audit, "command", lambda data_dir, output: [
        sys.executable, "-c", f"import sys; print('audit said {code}', file=sys.stderr); sys.exit({code})"])
    result = audit.run_audit(tmp_path, tmp_path / "a", required=False)
    assert result.status == status
    assert result.failed is (status != "clean")
    if status == "error":
        assert "exited with 3: audit said 3" in result.detail


def test_compose_is_its_own_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["chaos", "run", "--compose", "mb", "--data-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert main(["chaos", "run", "--compose", "--override", "log.segment.bytes=1024",
                 "--output", str(tmp_path / "out")]) == 2
    assert "a --compose cluster is configured in docker-compose.yml" in capsys.readouterr().err
    assert main(["chaos", "run", "--compose", "mb", "--audit", "--output", str(tmp_path / "out")]) == 2
    assert "audit them with `docker-compose run --rm audit`" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
