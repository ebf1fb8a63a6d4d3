"""Progress between iterations from one `git status`: the changed files, and a digest that
moves when a changed file changes again, when a commit is made, and only then."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.process import gitview
from worker.process.workspace_git import changed_files, diff_digest, work_state

from .conftest import git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "a.py").write_text("one\n")
    (tmp_path / "b.py").write_text("two\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return tmp_path


def _digest(repo: Path) -> str:
    state = work_state(repo)
    assert state is not None
    return state.digest


def test_changed_staged_deleted_renamed_and_untracked_files_are_listed(repo: Path) -> None:
    (repo / "a.py").write_text("changed\n")
    git(repo, "mv", "b.py", "c.py")
    (repo / "new").mkdir()
    (repo / "new" / "d.py").write_text("new\n")
    assert changed_files(repo) == ["a.py", "c.py", "new/d.py"]
    (repo / "a.py").unlink()
    assert changed_files(repo) == ["a.py", "c.py", "new/d.py"]


def test_the_digest_moves_with_each_change_and_only_then(repo: Path) -> None:
    clean = _digest(repo)
    assert _digest(repo) == clean
    (repo / "a.py").write_text("first edit\n")
    first = _digest(repo)
    (repo / "a.py").write_text("second edit\n")  # the same file changed again
    second = _digest(repo)
    assert len({clean, first, second}) == 3
    assert _digest(repo) == second
    (repo / "notes.txt").write_text("x")
    untracked = _digest(repo)
    assert untracked != second
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "work")
    committed = _digest(repo)
    assert committed not in (clean, first, second, untracked), "a commit is progress too"


def test_files_then_digest_cost_one_git_process(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    real = gitview.run_process  # worker's git runs through its view (worker.process.gitview)

    def counting(argv: list[str], **kwargs: object) -> object:
        calls.append(argv)
        return real(argv, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(gitview, "run_process", counting)
    (repo / "a.py").write_text("edit\n")
    files, digest = changed_files(repo), diff_digest(repo)
    assert files == ["a.py"] and digest == _digest(repo)
    assert len(calls) == 2  # one for the pair, one for the check above
    assert diff_digest(repo) == digest and len(calls) == 3, "a second digest looks again"


def test_outside_git_nothing_is_measured(tmp_path: Path) -> None:
    assert changed_files(tmp_path) == [] and diff_digest(tmp_path) is None
