"""The labelled corpus of real transcripts, the readers it needs, and the quality it measures.

tests/fixtures/transcripts/corpus/ holds real runs of Claude Code, Codex, OpenHands,
SWE-agent and mini-swe-agent with their sources and licences (its README.md); these tests
keep the index honest and hold the supervisor to the acceptance line on it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worker.cli.app import app
from worker.models import EventKind
from worker.supervision.formats import read_text
from worker.supervision.scoring import SPLITS, by_split, load_index, score

CORPUS = Path(__file__).parent / "fixtures" / "transcripts" / "corpus"
REPO = Path(__file__).resolve().parents[1]
LICENCES = {
    "MIT": ("LICENSE-SWE-agent.txt", "LICENSE-mini-swe-agent.txt", "LICENSE-OpenHands.txt"),
    "Unlicense": ("LICENSE-hive-mind.txt", "LICENSE-agent.txt", "LICENSE-formal-ai.txt"),
}
INDEX = load_index(CORPUS)
FIGURES = json.loads((CORPUS / "figures.json").read_text(encoding="utf-8"))
runner = CliRunner()


def run_worker(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess: exit codes as a shell sees them."""
    env = {**os.environ, "TERM": "dumb", "COLUMNS": "120", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "worker", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_file_is_indexed_with_a_licensed_source() -> None:
    """Each transcript names repository, path and commit, a licence whose text is beside it,
    a label, and for a stuck run its kind and where it turns stuck; nothing is unindexed."""
    indexed = {entry["file"] for entry in INDEX}
    on_disk = {p.name for p in CORPUS.iterdir() if p.suffix in (".json", ".jsonl", ".traj")} - {
        "index.json",
        "figures.json",
    }
    assert indexed == on_disk
    readme = (CORPUS / "README.md").read_text(encoding="utf-8")
    for entry in INDEX:
        source = entry["source"]
        assert source["repository"].count("/") == 1 and source["path"]
        assert re.fullmatch(r"[0-9a-f]{40}", source["commit"])
        assert entry["licence"] in LICENCES
        assert any((CORPUS / name).is_file() for name in LICENCES[entry["licence"]])
        assert entry["transformation"] and entry["why"]
        assert f"`{entry['file']}`" in readme
        if entry["label"] == "stuck":
            assert entry["stuck_kind"] and isinstance(entry["stuck_at"], int)


def test_the_files_are_small_and_carry_no_credentials() -> None:
    secret = re.compile(
        r"gh[pousr]_[A-Za-z0-9]{20,}|sk-(?:ant-)?[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}"
        r"|xox[abp]-[A-Za-z0-9-]{10,}|-----BEGIN [A-Z ]*PRIVATE KEY|AIza[0-9A-Za-z_-]{30,}"
    )
    for entry in INDEX:
        path = CORPUS / entry["file"]
        assert path.stat().st_size < 200_000, entry["file"]
        assert not secret.search(path.read_text(encoding="utf-8")), entry["file"]


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_each_transcript_is_read_in_its_format(entry: dict) -> None:
    """The format is recognised from the content alone, and the run's events are there."""
    text = (CORPUS / entry["file"]).read_text(encoding="utf-8")
    found, events = read_text(text)
    assert found == entry["format"]
    kinds = {event.kind.value for event in events}
    assert kinds - {"other"}, entry["file"]


def test_on_the_tuning_set_stuck_runs_are_caught_on_time_and_healthy_runs_left_alone() -> None:
    """Issue 19's acceptance on the project's own corpus (the tuning set): recall on time of at
    least 90 % and no false alarm (no urgent, stopping finding in a healthy run)."""
    tune = by_split([score(CORPUS, entry) for entry in INDEX])["tune"]
    assert tune["stuck"] >= 1 and tune["healthy"] >= 30
    assert tune["recall_on_time"] is not None and tune["recall_on_time"] >= 0.9
    assert tune["flagged_on_time"] >= 0.9, tune["flag_delays"]  # issue 41: within 3 events
    assert tune["false_alarms"] == 0, tune["false_alarm_files"]
    assert 0 < tune["saved_turns"] <= tune["wasted_turns"]


def _looks_stuck(entry: dict) -> set[str]:
    """What makes a run look stuck to a naive count: one command many times, many failing
    results, or the harness (or a user) answering the agent again and again."""
    text = (CORPUS / entry["file"]).read_text(encoding="utf-8")
    events = list(read_text(text, entry["format"])[1])
    calls = Counter(
        json.dumps(e.args, sort_keys=True) for e in events if e.kind is EventKind.TOOL_CALL
    )
    fails = sum(1 for e in events if e.kind is EventKind.TOOL_RESULT and e.is_error)
    users = sum(1 for e in events if e.kind is EventKind.OTHER and e.raw_type == "user")
    looks = set()
    if calls and max(calls.values()) >= 8:
        looks.add("command")
    if fails >= 8:
        looks.add("failures")
    if users >= 5:
        looks.add("harness")
    return looks


def test_healthy_runs_that_look_stuck_are_in_the_tuning_set_and_left_alone() -> None:
    """The balance to recall: the tuning set holds healthy runs that a naive count would call
    stuck (a reproduction script run 8 or more times between edits, 8 or more failing results
    such as a linter's or link checker's expected exit, 5 or more rejections or corrections
    spread over a working run), several of each, and not one of them is stopped."""
    found: dict[str, list[str]] = {"command": [], "failures": [], "harness": []}
    for entry in INDEX:
        if entry["label"] == "healthy" and entry["split"] == "tune":
            for look in _looks_stuck(entry):
                found[look].append(entry["file"])
    assert all(len(files) >= 4 for files in found.values()), found
    for file in sorted({f for files in found.values() for f in files}):
        entry = next(e for e in INDEX if e["file"] == file)
        result = score(CORPUS, entry)
        assert result.alarm is None, (file, result.alarm)


@pytest.mark.parametrize("split", SPLITS)
def test_neither_set_regresses_from_the_recorded_figures(split: str) -> None:
    """figures.json records each set's figures when they were last measured: recall on time
    may only rise and false alarms only fall; the sets' sizes match, so a transcript added or
    relabelled means measuring again and saying so in that file."""
    now = by_split([score(CORPUS, entry) for entry in INDEX])[split]
    recorded = FIGURES[split]
    assert (now["stuck"], now["healthy"]) == (recorded["stuck"], recorded["healthy"])
    assert now["false_alarms"] <= recorded["false_alarms"], now["false_alarm_files"]
    if recorded["recall_on_time"] is not None:
        assert now["recall_on_time"] >= recorded["recall_on_time"], now["missed"]


def test_the_holdout_was_set_aside_by_a_fixed_rule() -> None:
    """The held-out transcripts are the ones the rule in README.md picks, not a choice made
    after seeing how the detectors did on them, and none of them shares a source file with
    the tuning set."""
    holdout = [e for e in INDEX if e["split"] == "holdout"]
    assert holdout
    for entry in holdout:
        digest = hashlib.sha256(entry["source"]["path"].encode()).hexdigest()
        assert digest[0] in "01", entry["file"]
    tune = {_source(e) for e in INDEX if e["split"] == "tune"}
    assert not tune & {_source(e) for e in holdout}


def _source(entry: dict) -> tuple[str, str]:
    return entry["source"]["repository"], entry["source"]["path"]


def test_the_bench_prints_both_sets_figures_as_json() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench_detection.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    data = json.loads(result.stdout)
    assert data["transcripts"] == len(INDEX)
    for split in SPLITS:
        for key in (
            "recall",
            "recall_on_time",
            "flagged_on_time",
            "false_alarms",
            "saved_turns",
            "saved_usd",
        ):
            assert key in data[split]
        assert data[split]["false_alarms"] == FIGURES[split]["false_alarms"]
    assert data["tune"]["transcripts"] + data["holdout"]["transcripts"] == len(INDEX)
    assert data["written_edits"]["flagged_on_time"] == 1.0  # tests/fixtures/transcripts_edits


def test_inspect_reads_openhands_and_swe_agent_trajectories(tmp_path: Path) -> None:
    """`worker inspect` on each trajectory format: recognised, its tool calls counted; the
    healthy ones run to their end, and the OpenHands resolver run whose edits of `App.tsx`
    fail eight times in a row (relabelled stuck in issue 41) is stopped."""
    for name, fmt, stopped in (
        ("openhands-mswe-ponylang-ponyc-4588.jsonl", "openhands", False),
        ("openhands-resolver-issue-1.jsonl", "openhands", True),
        ("swe-pydicom-1458.traj", "sweagent", False),
        ("mini-django-django-12125.traj.json", "sweagent", False),
    ):
        result = runner.invoke(app, ["inspect", str(CORPUS / name), "-w", str(tmp_path), "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert data["format"] == fmt and data["tool_calls"] > 3
        assert (data["stop"] is not None) is stopped, data["stop"]


def test_inspect_finds_the_codex_401_sessions_and_where_to_stop(tmp_path: Path) -> None:
    path = CORPUS / "hive-codex-issue-715-401.jsonl"
    result = runner.invoke(app, ["inspect", str(path), "-w", str(tmp_path), "--json"])
    data = json.loads(result.stdout)
    levels = [(f["kind"], f["level"]) for f in data["findings"]]
    assert levels[:2] == [("cli_error", "warn"), ("cli_error", "urgent")]
    assert "401 Unauthorized" in data["stop"]["reason"]


def test_a_claude_usage_limit_is_left_alone_once_and_a_cli_error_when_it_comes_back(
    tmp_path: Path,
) -> None:
    """The corpus's CLI-error loops are all Codex. Claude Code reports a usage limit as a
    `result` with `is_error` (and `subtype: success`): once, as in the corpus's run, it is no
    finding; the same session replayed three times (a solver restarting it into the same
    limit) is the `cli_error` finding, warn at the second session and urgent at the third."""
    path = CORPUS / "hive-claude-issue-1152-usage-limit.jsonl"
    once = runner.invoke(app, ["inspect", str(path), "-w", str(tmp_path), "--json"])
    assert once.exit_code == 0, once.output
    assert json.loads(once.stdout)["findings"] == []
    looped = tmp_path / "three-sessions.jsonl"
    looped.write_text(path.read_text(encoding="utf-8") * 3, encoding="utf-8")
    result = runner.invoke(app, ["inspect", str(looped), "-w", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    cli = [f for f in json.loads(result.stdout)["findings"] if f["kind"] == "cli_error"]
    assert [(f["level"], f["count"]) for f in cli] == [("warn", 2), ("urgent", 3)]
    assert "hit your limit" in cli[-1]["evidence"]["error"]


def test_a_file_of_no_known_format_exits_65_naming_what_was_expected(tmp_path: Path) -> None:
    """A plain log used to replay as "claude" with no findings and exit 0."""
    log = tmp_path / "solve.log"
    log.write_text("[2025-11-11T12:18:52Z] [INFO] starting\n[INFO] done\n", encoding="utf-8")
    result = run_worker("inspect", str(log), "-w", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 65
    assert "not a transcript worker can read" in result.stderr
    assert "OpenHands" in result.stderr and "SWE-agent" in result.stderr
    assert result.stdout == ""


def test_a_format_the_content_contradicts_exits_65(tmp_path: Path) -> None:
    path = CORPUS / "swe-pydicom-1458.traj"
    result = run_worker(
        "inspect", str(path), "-w", str(tmp_path), "--format", "openhands", cwd=tmp_path
    )
    assert result.returncode == 65
    assert "this is a sweagent transcript, not openhands" in result.stderr


def test_an_opencode_style_stream_is_not_read_as_gemini(tmp_path: Path) -> None:
    """link-assistant/agent (OpenCode's event shape) prints `tool_use` and `text` events like
    Gemini's, with the payload under `part`: read as Gemini it replayed as tool calls with no
    tool. worker reads no such format, so it is an error naming what was expected."""
    lines = [
        {"type": "step_start", "sessionID": "s", "part": {"type": "step-start"}},
        {
            "type": "tool_use",
            "sessionID": "s",
            "part": {"type": "tool", "tool": "bash", "state": {"status": "completed"}},
        },
        {"type": "text", "sessionID": "s", "part": {"type": "text", "text": "done"}},
    ]
    path = tmp_path / "agent.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    result = run_worker("inspect", str(path), "-w", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 65
    assert "not a transcript worker can read" in result.stderr
