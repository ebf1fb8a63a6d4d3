"""Revisions of the worker code: find them in git, snapshot them, build them.

A revision runs from its own snapshot under `<state>/daemon/revisions/<sha>` (`git archive`,
unpacked), never from the checkout itself: the agent may be editing that checkout, rolling back
must not touch it, and the supervisor writes only inside the state folder. The child imports
the snapshot's code through PYTHONPATH. git and the build go through
worker.process.proc.run_process; git through worker's view of the repository
(`gitview.run_git`: none of its configuration is read), since the checkout may be the one an
agent works in (worker working on itself), whose `.git` the agent can write.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

import worker
from worker.config import Settings
from worker.daemon.health import REVISION_ENV
from worker.process.gitview import main_checkout, run_git
from worker.process.proc import redact, run_process
from worker.state.fsutil import replace

_DONE = ".worker-snapshot-complete"
_GIT_TIMEOUT_S = 60.0


def find_repo(settings: Settings) -> Path | None:
    """The git checkout to watch, or None when revisions are off or worker is not in git."""
    d = settings.daemon
    if not d.track_revisions:
        return None
    if d.repo is not None:
        return d.repo if d.repo.is_absolute() else settings.workspace / d.repo
    home = Path(worker.__file__).resolve().parent.parent
    return home if (home / ".git").exists() else None


def head(repo: Path) -> str | None:
    """The commit checked out in `repo`, or None (no commits yet, not a repository, or a
    `.git` that is a file or a link: worker follows neither)."""
    checkout = main_checkout(repo)
    if checkout is None:
        return None
    result = run_git(
        checkout, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", timeout_s=_GIT_TIMEOUT_S
    )
    sha = result.stdout.strip()
    return sha if result.exit_code == 0 and sha else None


def snapshot_dir(state_dir: Path, rev: str) -> Path:
    return state_dir / "daemon" / "revisions" / rev


def export(repo: Path, rev: str, dest: Path) -> str | None:
    """Unpack `rev` into `dest` unless already there; returns a failure reason or None."""
    if (dest / _DONE).exists():
        return None
    checkout = main_checkout(repo)
    if checkout is None:
        return f"{repo} has no .git folder of its own (worker follows no .git file or link)"
    partial = dest.with_name(dest.name + ".partial")
    archive = dest.with_name(dest.name + ".tar")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(dest, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        result = run_git(
            checkout,
            "archive",
            "--format=tar",
            "-o",
            str(archive),
            rev,
            timeout_s=_GIT_TIMEOUT_S * 5,
        )
        if result.exit_code != 0:
            return f"git archive failed: {_tail(result.stderr_tail or result.stdout)}"
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(partial, filter="data")  # no absolute paths, links out, devices
            else:  # pragma: no cover - Python < 3.11.4
                tar.extractall(partial)
        (partial / _DONE).write_text(rev + "\n", encoding="utf-8")
        replace(partial, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            archive.unlink()
        shutil.rmtree(partial, ignore_errors=True)
    return None


def expand(argv: Sequence[str], settings: Settings) -> list[str]:
    """`{python}` and `{workspace}` in configured commands, so worker.toml stays portable."""
    values = {"python": sys.executable, "workspace": str(settings.workspace)}
    return [part.format_map(values) for part in argv]


def build(settings: Settings, cwd: Path, env: dict[str, str]) -> str | None:
    """Run the configured build in the snapshot; a failure reason, or None for success."""
    d = settings.daemon
    if not d.build_command:
        return None
    result = run_process(
        expand(d.build_command, settings),
        cwd=cwd,
        timeout_s=d.build_timeout_s,
        env=env,
        log_path=settings.logs / "build.log",
    )
    if result.not_found:
        return f"build command not found: {_tail(result.stderr_tail)}"
    if result.timed_out:
        return f"build timed out after {d.build_timeout_s:g} s"
    if result.exit_code != 0:
        return (
            f"build failed (exit {result.exit_code}): {_tail(result.stderr_tail or result.stdout)}"
        )
    return None


def child_env(base: dict[str, str], snapshot: Path | None, rev: str | None) -> dict[str, str]:
    """The environment of a revision's processes: secrets pass through, never get written."""
    env = dict(base)
    if snapshot is not None:
        old = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(snapshot) + (os.pathsep + old if old else "")
    if rev is not None:
        env[REVISION_ENV] = rev
    return env


def prune(state_dir: Path, keep: set[str], limit: int) -> None:
    """Delete old snapshots beyond `limit`, never one named in `keep`."""
    root = state_dir / "daemon" / "revisions"
    if not root.is_dir():
        return
    snaps = sorted(
        (p for p in root.iterdir() if p.is_dir() and (p / _DONE).exists()),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    kept = 0
    for path in snaps:
        if path.name in keep or kept < limit:
            kept += 1
            continue
        shutil.rmtree(path, ignore_errors=True)


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return redact(lines[-1][:300]) if lines else "(no output)"
