"""Status reports (`<reports>/<machine-id>_latest.json`) and `worker fleet` over them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from tests.conftest import state_of
from worker.cli.app import app
from worker.models import AgentResult
from worker.supervision.reports import StatusReport, read_report, write_report

from .test_supervision_kit import Stream, feed, supervisor, view

NOW = datetime.now(UTC)


def report(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "reports" / "test-machine_latest.json").read_text())


def test_a_report_is_written_at_every_iteration_and_at_the_end(tmp_path: Path) -> None:
    """Each iteration rewrites the report (no temporary file left behind); finish marks it."""
    sup = supervisor(tmp_path)
    feed(sup, Stream().session("claude-sonnet-4-5").usage(50_000))
    sup.after_iteration(view(1, changed=("a.py",)))
    first = report(tmp_path)
    assert first["iteration"] == 1 and first["state"] == "running"
    assert first["health"] == "green" and first["supervisor_health"] is None
    assert first["task_id"] == "task-1" and first["mode"] == "code-simple"
    assert first["context_fill"] == 0.25 and first["cost_usd"] == 0.05
    sup.after_iteration(view(2, changed=("a.py", "b.py")))
    assert report(tmp_path)["iteration"] == 2
    sup.finish("success")
    last = report(tmp_path)
    assert last["state"] == "finished" and last["outcome"] == "success"
    assert [p.name for p in (tmp_path / "reports").iterdir()] == ["test-machine_latest.json"]
    assert read_report(tmp_path / "reports" / "test-machine_latest.json").iteration == 2


def test_health_is_amber_on_a_warning_and_red_on_a_stop(tmp_path: Path) -> None:
    """The supervisor's own assessment is recorded when it differs from the loop's."""
    sup = supervisor(tmp_path, radio_check_events=1)
    feed(sup, Stream().usage(170_000))
    sup.after_iteration(view(1, changed=("a",)))
    data = report(tmp_path)
    assert (data["health"], data["loop_health"], data["supervisor_health"]) == (
        "amber",
        "green",
        "amber",
    )
    assert data["last_anomalies"] and data["last_anomalies"][0].startswith("context (warn)")
    loop = Stream()
    for _ in range(6):
        loop.tool("Bash", {"command": "ls"})
    stop = feed(sup, loop)
    assert stop is not None
    data = report(tmp_path)  # written when the stop was decided, before the iteration ends
    assert data["health"] == "red" and data["stopped"] == stop


def test_the_loop_health_follows_the_iteration_outcome(tmp_path: Path) -> None:
    sup = supervisor(tmp_path)
    sup.after_iteration(view(1, changed=("a",), result=AgentResult(exit_code=1, is_error=True)))
    data = report(tmp_path)
    assert data["health"] == "red" and data["loop_health"] == "red"
    assert data["supervisor_health"] == "green"


def test_an_unwritable_reports_folder_does_not_fail_the_task(tmp_path: Path) -> None:
    (tmp_path / "reports").write_text("a file where the folder should be")
    sup = supervisor(tmp_path)
    assert sup.after_iteration(view(changed=("a",))) == []
    assert sup.finish("success") == []


def test_reports_off_writes_nothing(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, reports=False)
    sup.after_iteration(view(changed=("a",)))
    sup.finish("success")
    assert not (tmp_path / "reports").exists()


def _write(folder: Path, machine: str, age: timedelta, **fields: object) -> None:
    write_report(
        folder,
        StatusReport(
            machine_id=machine,
            started_at=NOW - age,
            updated_at=NOW - age,
            **fields,  # type: ignore[arg-type]
        ),
    )


def test_fleet_shows_every_machine_flags_stale_and_names_malformed(tmp_path: Path) -> None:
    """Three machines share a reports folder: one fresh, one silent for a day, one whose
    report is broken. The broken one is named, not fatal; the stale one is flagged."""
    folder = tmp_path / "shared-reports"
    _write(
        folder,
        "alpha",
        timedelta(minutes=5),
        task_id="t-1",
        mode="code-simple",
        iteration=2,
        health="amber",
        pace="alternate",
        context_fill=0.5,
        last_anomalies=["loop (warn) ×3 Bash from event 4"],
    )
    _write(folder, "beta", timedelta(days=1), state="finished", outcome="success")
    (folder / "gamma_latest.json").write_text("{not json")
    (folder / ".alpha.x1y2.tmp").write_text("half a report")  # a write in progress: skipped
    runner = CliRunner()
    args = ["fleet", "--workspace", str(tmp_path), "--reports", str(folder)]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [row["machine"] for row in data["rows"]] == ["alpha", "beta", "gamma"]
    assert data["stale"] == ["beta"] and data["malformed"] == ["gamma_latest.json"]
    alpha = data["rows"][0]
    assert (alpha["health"], alpha["task"], alpha["iteration"], alpha["pace"]) == (
        "amber",
        "t-1",
        2,
        "alternate",
    )
    assert "not JSON" in data["rows"][2]["error"]
    text = runner.invoke(app, args)
    assert text.exit_code == 0
    assert "STALE" in text.stdout and "unreadable reports: gamma_latest.json" in text.stdout
    assert "loop (warn)" in text.stdout


def test_fleet_reads_the_workspace_reports_folder_by_default(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["fleet", "--workspace", str(tmp_path)])
    assert result.exit_code == 0 and "no status reports in" in result.stdout
    _write(state_of(tmp_path) / "reports", "test-machine", timedelta(seconds=3))
    data = json.loads(runner.invoke(app, ["fleet", "-w", str(tmp_path), "--json"]).stdout)
    assert [row["machine"] for row in data["rows"]] == ["test-machine"] and data["stale"] == []


def test_stale_after_follows_the_iteration_timeout(tmp_path: Path) -> None:
    """No report for two iteration timeouts (a running task writes between iterations)."""
    (tmp_path / "worker.toml").write_text("iteration_timeout_s = 60\n")
    _write(state_of(tmp_path) / "reports", "slow", timedelta(seconds=150))
    data = json.loads(CliRunner().invoke(app, ["fleet", "-w", str(tmp_path), "--json"]).stdout)
    assert data["stale_after_s"] == 120 and data["stale"] == ["slow"]


def test_a_report_of_another_schema_version_is_named_not_read(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    _write(folder, "new", timedelta(0))
    path = folder / "new_latest.json"
    path.write_text(path.read_text().replace('"schema_version": 1', '"schema_version": 9'))
    data = json.loads(
        CliRunner()
        .invoke(app, ["fleet", "-w", str(tmp_path), "--reports", str(folder), "--json"])
        .stdout
    )
    assert "schema_version 9" in data["rows"][0]["error"]
