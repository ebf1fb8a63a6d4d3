"""Nothing locks a person out: with a broken `worker.toml`, a stray `WORKER_*` variable, or a
workspace that holds the state folder (the home folder), `doctor`, `status`, `log`, `inspect`
and `--help` still run and report, `doctor` naming each problem and its fix; unknown settings
are named with the closest real one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import REPO, TRANSCRIPTS
from worker.cli.app import app
from worker.config import LAZY_SECTIONS, Settings, load_settings, section_model
from worker.config_load import NOT_SETTINGS, Keys
from worker.errors import ConfigError

TRANSCRIPT = TRANSCRIPTS / "claude-stream-simple-text.jsonl"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    ws = tmp_path / "project"
    ws.mkdir()
    return ws


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder with no XDG_STATE_HOME: the state folders lie in `~/.local/state`."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    return folder


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ('machin_id = "a"\n', "`machin_id` is not a setting; did you mean `machine_id`?"),
        (
            '[github]\nrepo = ["a/b"]\n',
            "`github.repo` is not a setting; did you mean `github.repos`?",
        ),
        ("[daemon]\nintervall_s = 5\n", "did you mean `daemon.interval_s`?"),
        ("interval_s = 5\n", "did you mean `daemon.interval_s`?"),  # another section's key
    ],
)
def test_an_unknown_key_in_worker_toml_is_named_with_the_closest_setting(
    project: Path, toml: str, needle: str
) -> None:
    (project / "worker.toml").write_text(toml)
    with pytest.raises(ConfigError) as raised:
        load_settings(project, env={})
    assert needle in str(raised.value) and str(project / "worker.toml") in str(raised.value)
    assert raised.value.exit_code == 78


def test_an_unknown_worker_variable_is_a_warning_and_the_run_goes_on(
    cli: CliRunner, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`WORKER_ID=x worker run --dry-run` used to exit 78 ("id: Extra inputs are not
    permitted"): now it runs, and says which variable is ignored and what was meant."""
    monkeypatch.setenv("WORKER_ID", "x")
    monkeypatch.setenv("WORKER_GITHUB__REPO", '["a/b"]')
    result = cli.invoke(app, ["run", "--dry-run", "-w", str(project)])
    assert result.exit_code == 0, result.output
    assert "WORKER_ID: not a worker setting (ignored); did you mean `WORKER_MACHINE_ID`?" in (
        result.stderr
    )
    assert "WORKER_GITHUB__REPO: not a worker setting (ignored); did you mean " in result.stderr
    assert "`WORKER_GITHUB__REPOS`?" in result.stderr
    assert "dry run" in result.stdout
    settings = load_settings(project)
    assert settings.github.repos == []
    assert sorted(p.where for p in settings.problems) == ["WORKER_GITHUB__REPO", "WORKER_ID"]
    assert not any(p.fatal for p in settings.problems)


def _situation(name: str, project: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Set up one of the situations that used to exit 78; the workspace to run in."""
    if name == "bad worker.toml":
        (project / "worker.toml").write_text('machin_id = "a"\nlease_seconds = "soon"\n')
        return project
    if name == "broken worker.toml":
        (project / "worker.toml").write_text("this is [not toml\n")
        return project
    if name == "stray variable":
        monkeypatch.setenv("WORKER_ID", "x")
        return project
    return home  # the home folder holds the default state folder


SITUATIONS = ["bad worker.toml", "broken worker.toml", "stray variable", "home folder"]
PROBLEM = {
    "bad worker.toml": "did you mean `machine_id`?",
    "broken worker.toml": "cannot read it",
    "stray variable": "WORKER_ID",
    "home folder": "holds worker's state folder",
}


@pytest.mark.parametrize("situation", SITUATIONS)
def test_doctor_reports_each_problem_and_its_fix(
    cli: CliRunner, project: Path, home: Path, monkeypatch: pytest.MonkeyPatch, situation: str
) -> None:
    ws = _situation(situation, project, home, monkeypatch)
    result = cli.invoke(app, ["doctor", "--json", "-w", str(ws)])
    data = json.loads(result.stdout)  # a report, whatever the exit code
    config = [f for f in data["findings"] if f["check"] == "config"]
    assert config and PROBLEM[situation] in config[0]["message"]
    assert {f["check"] for f in data["findings"]} >= {"config", "modes", "state", "inbox"}
    if situation == "stray variable":  # a warning: `worker run` goes on without it
        assert config[0]["status"] == "warn"
    else:
        assert config[0]["status"] == "fail" and result.exit_code == 78
    if situation == "home folder":
        assert "cd into it, or --workspace DIR" in config[0]["message"]
    if situation == "bad worker.toml":
        assert "lease_seconds: Input should be a valid integer" in config[1]["message"]
        assert "correct the value, or remove it for the default" in config[1]["message"]


@pytest.mark.parametrize("situation", SITUATIONS)
@pytest.mark.parametrize(
    "argv",
    [["status"], ["log"], ["inspect", str(TRANSCRIPT)], ["status", "--json"], ["queue"], ["costs"]],
)
def test_the_commands_that_report_report_and_name_the_problem(
    cli: CliRunner,
    project: Path,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    situation: str,
    argv: list[str],
) -> None:
    ws = _situation(situation, project, home, monkeypatch)
    result = cli.invoke(app, [*argv, "-w", str(ws)])
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    assert PROBLEM[situation] in result.stderr
    assert result.stdout.strip()  # the report itself
    if "--json" in argv:
        assert json.loads(result.stdout)["state"]["state_dir"]


@pytest.mark.parametrize("situation", SITUATIONS)
@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["doctor", "--help"]])
def test_help_never_reads_the_configuration(
    cli: CliRunner,
    project: Path,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    situation: str,
    argv: list[str],
) -> None:
    ws = _situation(situation, project, home, monkeypatch)
    monkeypatch.chdir(ws)
    result = cli.invoke(app, argv)
    assert result.exit_code == 0 and "Usage:" in result.stdout


def test_a_run_from_the_home_folder_says_in_one_line_what_to_do(home: Path) -> None:
    """The real program: exit 78 (a configuration to fix) and one line on stderr."""
    env = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}
    proc = subprocess.run(
        [sys.executable, "-m", "worker", "run", "--dry-run"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 78
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"error: {home}: this folder holds worker's state folder")
    assert "run worker in your project's folder (cd into it, or --workspace DIR)" in line
    assert "or set state_dir to a folder outside this one" in line


def test_a_bad_worker_toml_still_stops_a_run_naming_every_problem(project: Path) -> None:
    (project / "worker.toml").write_text('machin_id = "a"\n[github]\nrepo = ["a/b"]\n')
    with pytest.raises(ConfigError) as raised:
        load_settings(project, env={"WORKER_LEASE_SECONDS": "soon"})
    lines = str(raised.value).splitlines()
    assert lines[0] == "invalid configuration:" and len(lines) == 4
    assert "WORKER_LEASE_SECONDS: lease_seconds: Input should be a valid integer" in lines[3]
    lenient = load_settings(project, env={"WORKER_LEASE_SECONDS": "soon"}, lenient=True)
    assert lenient.lease_seconds == 3600 and len(lenient.problems) == 3  # the defaults


_VARIABLE = re.compile(r"""(?:environ(?:\.get)?[(\[]\s*|getenv\()["'](WORKER_\w+)""")
_ASSIGNED = re.compile(r"\b(WORKER_\w+)=")


def test_every_worker_variable_the_project_reads_or_documents_is_a_setting() -> None:
    """A switch that is no setting (a benchmark's) does not take the settings' prefix, where
    it would be an unknown setting: BENCH_1M, not WORKER_BENCH_1M."""
    keys = Keys(Settings, LAZY_SECTIONS, section_model)
    found: set[str] = set()
    for folder in ("worker", "bench"):
        for path in (REPO / folder).rglob("*.py"):
            found.update(_VARIABLE.findall(path.read_text(encoding="utf-8")))
    found.update(_ASSIGNED.findall((REPO / "README.md").read_text(encoding="utf-8")))
    assert found  # the patterns find what they look for
    strays = [
        name
        for name in sorted(found)
        if name not in NOT_SETTINGS
        and not keys.known(tuple(name.removeprefix("WORKER_").lower().split("__")))
    ]
    assert strays == []


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("WORKER_ID", "WORKER_MACHINE_ID"),  # the key as a word of a setting's name
        ("WORKER_LEASE_SECOND", "WORKER_LEASE_SECONDS"),  # a close spelling
        ("WORKER_INTERVAL_S", "WORKER_DAEMON__INTERVAL_S"),  # a key of a section
        ("WORKER_REVIEW__STYLE__INTERVALL", "WORKER_REVIEW__STYLE__INTERVAL"),
        ("WORKER_GITHUB_TOKN", "WORKER_GITHUB_TOKEN"),  # a variable that is no setting
    ],
)
def test_an_unknown_variable_is_named_with_the_closest_real_one(
    project: Path, name: str, meant: str
) -> None:
    (problem,) = load_settings(project, env={name: "1"}).problems
    assert (problem.where, problem.fatal) == (name, False)
    assert problem.fix == f"did you mean `{meant}`?"


def test_a_warning_or_error_with_brackets_is_printed_as_it_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A message naming `[github] repos` or holding `[/x]` is text, not Rich markup: it was
    dropped as a style, or raised MarkupError in the middle of reporting a problem."""
    from worker.cli import ui

    ui.warn("worker.toml: `[github] repos` is not a setting [/x]")
    ui.error("cannot read [section]")
    err = capsys.readouterr().err
    assert "warning: worker.toml: `[github] repos` is not a setting [/x]" in err
    assert "error: cannot read [section]" in err
