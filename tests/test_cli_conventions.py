"""The conventions of a Python command line: exit 70 for worker's own bugs (not 1, which says
a task failed), with the traceback saved to a file the message names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from worker.cli import app as cli_app
from worker.errors import ExitCode


def run_main(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    """`worker ARGV` through the console entry point (`main`), as the installed command runs."""
    monkeypatch.setattr(sys, "argv", ["worker", *argv])
    with pytest.raises(SystemExit) as exited:
        cli_app.main()
    return int(exited.value.code or 0)


def test_an_internal_error_exits_70_naming_the_saved_traceback(
    monkeypatch: pytest.MonkeyPatch, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug inside a command (here `schedule`'s renderer raising KeyError, with a token in its
    message) exits 70, not 1; stderr names the error and a file that holds the traceback, with
    the token masked in both."""
    from worker.cli import schedule

    token = "ghp_" + "A1b2C3d4" * 5

    def broken(*_args: object, **_kwargs: object) -> None:
        raise KeyError(f"no such thing {token}")

    monkeypatch.setattr(schedule, "render", broken)
    code = run_main(monkeypatch, "schedule", "cron", "-w", str(workspace))
    err = capsys.readouterr().err
    assert code == ExitCode.SOFTWARE == 70
    assert "internal error" in err and "KeyError" in err
    saved = Path(err.split("the traceback is in ")[1].split()[0].rstrip(".,;"))
    text = saved.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text and "in broken" in text
    assert "schedule cron" in text.splitlines()[0]
    assert token not in text and token not in err
