"""The README's quick start, followed line by line as a new user would, with a stand-in agent.

The quick start's code block is read from README.md and each of its `worker` lines runs through
the shell, in a fresh git repository standing in for "your project", with `claude` on the
`PATH` (the fake that prints real stream-json) and no `WORKER_*` variable set: the same
situation as a first day. The two install lines are the README's Set-up, which CI runs
itself; here they are only held to their documented form. If the quick start changes, this
test follows it; if a line stops working, it fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, FakeAgent, git, needs_posix

README = REPO / "README.md"


def quick_start_lines() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```sh\n(.*?)^```", section, re.S | re.M)
    assert block, "the quick start has no ```sh block"
    return [line.split(" #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_quick_start_is_short_and_comes_first() -> None:
    text = README.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[0] == "Quick start"
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert len(section.strip().splitlines()) <= 45
    for said in ("--use-worktree", "uncommitted", "costs money"):
        assert said in section, f"the quick start does not say {said!r}"


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "your-project"
    project.mkdir()
    git(project, "init", "-q")
    (project / "app.py").write_text("print('hello')\n")
    git(project, "add", ".")
    git(project, "-c", "user.name=A", "-c", "user.email=a@example.com", "commit", "-qm", "init")
    return project


def _first_day_env(fake_claude: FakeAgent, tmp_path: Path) -> dict[str, str]:
    """The user's shell: `claude` and worker on the PATH, no WORKER_* variable but one: the
    stand-in agent keeps its call log outside the project, a write the agent's sandbox rightly
    refuses (tests/test_sandbox*.py hold the sandbox itself)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKER_")}
    env["WORKER_SANDBOX__MODE"] = env["WORKER_SANDBOX__UNTRUSTED_MODE"] = "off"
    bin_dirs = [str(fake_claude.path.parent), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join([*bin_dirs, env.get("PATH", "")])
    env["HOME"] = str(tmp_path / "home")
    (tmp_path / "home").mkdir()
    return env


@needs_posix("runs the quick start's lines through sh")
def test_the_quick_start_followed_literally_finishes_a_task(
    tmp_path: Path, fake_claude: FakeAgent
) -> None:
    lines = quick_start_lines()
    install, rest = lines[:2], lines[2:]
    assert install[0].startswith("python3 -m venv ") and install[1].startswith("pip install ")
    assert rest[0].startswith("cd "), "the quick start sends the reader into their project"
    project = _project(tmp_path)
    env = _first_day_env(fake_claude, tmp_path)
    fake_claude.answers(
        {
            "text": "Added the flag.",
            "status": "success",
            "reason": "added the verbose option",
            "files": [{"path": "verbose.txt", "text": "--verbose\n"}],
        }
    )
    outputs: dict[str, str] = {}
    for line in rest[1:]:
        assert line.startswith("worker "), f"a quick start line that is not worker's: {line}"
        done = subprocess.run(
            ["sh", "-c", line], cwd=project, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"`{line}` exited {done.returncode}:\n{done.stderr}"
        outputs[line] = done.stdout
    assert len(fake_claude.task_calls) == 1, "exactly one paid call: the submitted task"
    assert "success" in outputs["worker run"]
    assert "success" in outputs["worker log"] and "Add a verbose option" in outputs["worker log"]
    assert "added the verbose option" in outputs["worker show 1"]
    assert "worker" in outputs["worker schedule cron"] and " run" in outputs["worker schedule cron"]
    # Where the edits land: the working tree, uncommitted, and nothing of worker's beside them.
    assert git(project, "status", "--porcelain").splitlines() == ["?? verbose.txt"]
    assert git(project, "rev-list", "--count", "HEAD").strip() == "1"


@pytest.mark.parametrize("line", ["worker run --dry-run", "worker doctor"])
def test_the_quick_start_changes_nothing_before_the_run(
    tmp_path: Path, fake_claude: FakeAgent, line: str
) -> None:
    """The look-before-you-leap lines cost nothing: no agent call, nothing in the project."""
    project = _project(tmp_path)
    env = _first_day_env(fake_claude, tmp_path)
    subprocess.run(["sh", "-c", 'worker submit "a task"'], cwd=project, env=env, check=True)
    done = subprocess.run(
        ["sh", "-c", line], cwd=project, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    paid = [call for call in fake_claude.calls if call["argv"] != ["--version"]]
    assert paid == [], "only `claude --version` may run before `worker run`"
    assert git(project, "status", "--porcelain") == ""
