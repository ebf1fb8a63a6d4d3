"""A project as a maintainer has it: a git repository with one commit and an `origin` (a bare
repository beside it) that worker pushes its branches to."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import git


def project_with_origin(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    """`tmp_path/name` holding `files` committed on `main`, pushed to `tmp_path/origin.git`;
    worker.toml is ignored by git, as a user would keep it out of their commits."""
    origin, ws = tmp_path / "origin.git", tmp_path / name
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    for path, text in {**files, ".gitignore": "worker.toml\n"}.items():
        (ws / path).write_text(text)
    git(ws, "add", "-A")
    git(ws, "-c", "user.name=m", "-c", "user.email=m@m", "commit", "-qm", "init")
    git(ws, "remote", "add", "origin", str(origin))
    git(ws, "push", "-q", "origin", "main")
    return ws
