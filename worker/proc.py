"""The one chokepoint for external processes.

Every command starts in its own process group (a new session on POSIX, a group and a Job Object
on Windows: worker/platform/process.py), its stdout is read line by line, written to a log file
and capped in memory, and a timeout or a stop request from the caller ends the whole tree
(children included). Command lines are logged with secrets redacted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import worker
from worker.boundedio import LINE_CAP, LOG_CAP, CappedLog, bounded_lines
from worker.fleet.settings import redact_url
from worker.platform.process import TreeProcess

log = logging.getLogger(__name__)

# Called with each stdout line (without the newline); returning a reason string stops the run.
LineHandler = Callable[[str], str | None]

_SECRET_ARG = re.compile(r"(?i)(token|secret|password|api[_-]?key)=\S+")
_SECRET_SHAPES = re.compile(
    r"(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9-]{20,})"
)
_GRACE_S = 3.0
_POLL_S = 0.2  # how often the watchdog looks at the clock and the stop flag


@dataclass
class ProcResult:
    argv: list[str]
    exit_code: int | None
    stdout: str  # capped: the first `cap` bytes of output
    stderr_tail: str
    duration_s: float
    timed_out: bool = False
    stopped: str | None = None
    truncated: bool = False
    not_found: bool = False


def redact(text: str) -> str:
    """Hide token-shaped strings and `key=value` secrets from a text meant for logs."""
    text = _SECRET_ARG.sub(lambda m: m.group(0).split("=", 1)[0] + "=***", text)
    for name in ("GITHUB_TOKEN", "WORKER_GITHUB_TOKEN", "ANTHROPIC_API_KEY"):
        value = os.environ.get(name)
        if value and len(value) >= 8:
            text = text.replace(value, "***")
    text = redact_url(text)
    return _SECRET_SHAPES.sub("***", text)


# The worker's own GitHub token must not reach the agent: an agent reading an untrusted issue
# could otherwise act as the worker (approve its own wait, label issues as trusted work).
_WORKER_SECRETS = (
    "WORKER_GITHUB_TOKEN",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "WORKER_GIT_TOKEN",
    "WORKER_FLEET__DATABASE_URL",
)


def child_env() -> dict[str, str]:
    """The environment for child processes: ours, less the worker's tokens (and any variable
    holding the same value under another name, such as GH_TOKEN)."""
    env = dict(os.environ)
    if worker.PYDANTIC_SWITCH[1] in env:  # worker's own switch, not the operator's
        for name in worker.PYDANTIC_SWITCH:
            env.pop(name, None)
    secrets = {env[name] for name in _WORKER_SECRETS if env.get(name)}
    return {
        name: value
        for name, value in env.items()
        if name not in _WORKER_SECRETS and value not in secrets
    }


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout_s: float,
    stdin_text: str | None = None,
    env: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    on_line: LineHandler | None = None,
    cap_bytes: int = 2_000_000,
    stop: threading.Event | None = None,
    on_start: Callable[[int], None] | None = None,
    on_stderr: LineHandler | None = None,
    line_cap_bytes: int = LINE_CAP,
    log_cap_bytes: int = LOG_CAP,
) -> ProcResult:
    """Run `argv` to its end, its timeout, until `on_line` asks to stop, or until `stop` is
    set (checked a few times a second, also while the command prints nothing); never raises
    for a failing command (a missing executable is reported as `not_found`). Without `env`
    the child gets `child_env()`: never the worker's GitHub token. `on_stderr` sees each
    stderr line and may stop the run the same way (CLIs that report retries only there)."""
    argv = [str(part) for part in argv]
    log.info("run: %s (cwd=%s, timeout=%ss)", redact(" ".join(argv)), cwd, timeout_s)
    started = time.monotonic()
    try:
        proc: TreeProcess[str] = TreeProcess(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else child_env(),
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        return ProcResult(argv, None, "", f"cannot start {argv[0]}: {exc}", 0.0, not_found=True)
    if on_start is not None:
        on_start(proc.pid)  # the pid is also the process group's id (a new session)

    state: dict[str, str | bool | None] = {"timed_out": False, "stopped": None}
    stderr_lines: list[str] = []

    def on_err(line: str) -> None:
        reason = on_stderr(line.rstrip("\n")) if on_stderr is not None else None
        if reason and not state["stopped"]:
            state["stopped"] = reason
            kill_group(proc)

    err_reader = threading.Thread(
        target=_drain, args=(proc.stderr, stderr_lines, on_err), daemon=True
    )
    err_reader.start()
    if stdin_text is not None and proc.stdin is not None:
        feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin_text), daemon=True)
        feeder.start()

    deadline = started + timeout_s
    finished = threading.Event()

    def watchdog() -> None:
        # Ends the group on timeout or on a stop request, even when the command is silent.
        while not finished.wait(_POLL_S):
            if stop is not None and stop.is_set():
                state["stopped"] = "stop requested"
                kill_group(proc)
                return
            if time.monotonic() >= deadline:
                state["timed_out"] = True
                kill_group(proc)
                return

    dog = threading.Thread(target=watchdog, name="proc-watchdog", daemon=True)
    dog.start()

    chunks: list[str] = []
    size = 0
    truncated = False
    stopped: str | None = None
    log_file = CappedLog(log_path, log_cap_bytes) if log_path is not None else None
    try:
        assert proc.stdout is not None
        # Raw bytes in chunks: one endless line never sits whole in memory.
        for line in bounded_lines(proc.stdout, line_cap_bytes):
            if log_file is not None:
                log_file.write(line)
            if size < cap_bytes:
                chunks.append(line)
                size += len(line)
            else:
                truncated = True
            if on_line is not None and stopped is None:
                stopped = on_line(line.rstrip("\n"))
                if stopped:
                    kill_group(proc)
            if time.monotonic() > deadline + _GRACE_S:
                break
    finally:
        finished.set()
        if log_file is not None:
            log_file.close()
    try:
        exit_code: int | None = proc.wait(timeout=_GRACE_S * 2)
    except subprocess.TimeoutExpired:
        kill_group(proc, force=True)
        exit_code = proc.wait()
    # A child that kept our pipes open must not outlive its leader.
    kill_group(proc, force=True)
    err_reader.join(timeout=1.0)
    for stream in (proc.stdout, proc.stderr, proc.stdin):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.close()
    return ProcResult(
        argv=argv,
        exit_code=exit_code,
        stdout="".join(chunks),
        stderr_tail="".join(stderr_lines)[-4000:],
        duration_s=time.monotonic() - started,
        timed_out=bool(state["timed_out"]),
        stopped=stopped or (str(state["stopped"]) if state["stopped"] else None),
        truncated=truncated,
    )


def kill_group(proc: TreeProcess[str], *, force: bool = False) -> None:
    """End the process and its whole tree: asked first, forced after a grace (`force`: at once)."""
    proc.end_tree(0.0 if force else _GRACE_S)


def _drain(
    stream: IO[str] | None, into: list[str], on_line: Callable[[str], None] | None = None
) -> None:
    if stream is None:
        return
    total = 0
    for line in bounded_lines(stream, 16_000):
        if on_line is not None:
            on_line(line)
        into.append(line)
        total += len(line)
        while total > 16_000 and len(into) > 1:
            total -= len(into.pop(0))


def _feed(stream: IO[str], text: str) -> None:
    with contextlib.suppress(BrokenPipeError, OSError, ValueError):
        stream.write(text)
    with contextlib.suppress(BrokenPipeError, OSError, ValueError):
        stream.close()
