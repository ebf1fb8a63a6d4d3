"""The one chokepoint for external processes.

Every command starts in its own process group (a new session on POSIX, a group and a Job Object
on Windows: worker/process/platform/process.py), its stdout is read line by line, written to a log
file and capped in memory, and a timeout or a stop request from the caller ends the whole tree
(children included). Command lines are logged with secrets redacted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import worker
from worker import secrets
from worker.process.boundedio import LINE_CAP, LOG_CAP, CappedLog, bounded_lines
from worker.process.platform.process import TreeProcess

log = logging.getLogger(__name__)

# Called with each stdout line (without the newline); returning a reason string stops the run.
LineHandler = Callable[[str], str | None]

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
    """Hide every secret worker knows of (worker/secrets.py) from a text meant for logs."""
    return secrets.mask(text)


def output_redactor() -> Callable[[str], str]:
    """What a child's output log keeps of each line: the secrets of the environment now (each
    form of them) and token-shaped strings hidden. Cheaper than `redact` (the values are
    looked up once; no `key=value` rule, which would mangle the code an agent prints)."""
    return secrets.masker()


def child_env() -> dict[str, str]:
    """The environment for worker's own child processes: ours, less worker's secrets (and any
    variable holding the same value under another name, such as GH_TOKEN). An agent gets less
    still (`secrets.agent_env`, worker/sandbox/box.py)."""
    env = dict(os.environ)
    if worker.PYDANTIC_SWITCH[1] in env:  # worker's own switch, not the operator's
        for name in worker.PYDANTIC_SWITCH:
            env.pop(name, None)
    known = {*secrets.WORKER_SECRETS, *secrets.remembered()}
    values = {env[name] for name in known if env.get(name)}
    return {name: value for name, value in env.items() if name not in known and value not in values}


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
    merge_stderr: bool = False,
) -> ProcResult:
    """Run `argv` to its end, its timeout, until `on_line` asks to stop, or until `stop` is
    set (checked a few times a second, also while the command prints nothing); never raises
    for a failing command (a missing executable is reported as `not_found`). Without `env`
    the child gets `child_env()`: never the worker's GitHub token. `on_stderr` sees each
    stderr line and may stop the run the same way (CLIs that report retries only there).
    `merge_stderr`: stderr joins stdout, in order (in `stdout` and the log; none in the tail)."""
    argv = [str(part) for part in argv]
    log.info("run: %s (cwd=%s, timeout=%ss)", redact(" ".join(argv)), cwd, timeout_s)
    started = time.monotonic()
    try:
        proc = _start(argv, cwd, env, piped_stdin=stdin_text is not None, merge=merge_stderr)
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        return ProcResult(argv, None, "", f"cannot start {argv[0]}: {exc}", 0.0, not_found=True)
    if on_start is not None:
        on_start(proc.pid)  # the pid is also the process group's id (a new session)
    deadline = started + timeout_s
    guard = _Guard(proc, deadline, stop, on_stderr)
    guard.start()
    if stdin_text is not None and proc.stdin is not None:
        feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin_text), daemon=True)
        feeder.start()
    try:
        out = _read_stdout(
            proc,
            on_line,
            deadline,
            cap_bytes=cap_bytes,
            line_cap_bytes=line_cap_bytes,
            log=CappedLog(log_path, log_cap_bytes, output_redactor()) if log_path else None,
        )
    finally:
        guard.finished.set()
    exit_code = _reap(proc, guard)
    return ProcResult(
        argv=argv,
        exit_code=exit_code,
        stdout="".join(out.chunks),
        stderr_tail="".join(guard.stderr_lines)[-4000:],
        duration_s=time.monotonic() - started,
        timed_out=guard.timed_out,
        stopped=out.stopped or guard.stopped,
        truncated=out.truncated,
    )


def _start(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str] | None,
    *,
    piped_stdin: bool,
    merge: bool = False,
) -> TreeProcess[str]:
    return TreeProcess(
        argv,
        cwd=cwd,
        stdin=subprocess.PIPE if piped_stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge else subprocess.PIPE,
        env=dict(env) if env is not None else child_env(),
        text=True,
        encoding="utf-8",
        errors="replace",
        bufsize=1,
    )


class _Guard:
    """Ends the process group on a timeout or a stop request (a watchdog thread, so even while
    the command is silent), or when a stderr line asks to stop (a reader thread)."""

    def __init__(
        self,
        proc: TreeProcess[str],
        deadline: float,
        stop: threading.Event | None,
        on_stderr: LineHandler | None,
    ) -> None:
        self.proc, self.deadline, self.stop, self.on_stderr = proc, deadline, stop, on_stderr
        self.timed_out = False
        self.stopped: str | None = None
        self.stderr_lines: list[str] = []
        self.finished = threading.Event()  # set when stdout is read to its end
        self.err_reader = threading.Thread(
            target=_drain, args=(proc.stderr, self.stderr_lines, self._on_err), daemon=True
        )
        self.dog = threading.Thread(target=self._watch, name="proc-watchdog", daemon=True)

    def start(self) -> None:
        self.err_reader.start()
        self.dog.start()

    def _on_err(self, line: str) -> None:
        reason = self.on_stderr(line.rstrip("\n")) if self.on_stderr is not None else None
        if reason and not self.stopped:
            self.stopped = reason
            kill_group(self.proc)

    def _watch(self) -> None:
        while not self.finished.wait(_POLL_S):
            if self.stop is not None and self.stop.is_set():
                self.stopped = "stop requested"
                kill_group(self.proc)
                return
            if time.monotonic() >= self.deadline:
                self.timed_out = True
                kill_group(self.proc)
                return


@dataclass
class _Output:
    chunks: list[str]
    truncated: bool = False
    stopped: str | None = None


def _read_stdout(
    proc: TreeProcess[str],
    on_line: LineHandler | None,
    deadline: float,
    *,
    cap_bytes: int,
    line_cap_bytes: int,
    log: CappedLog | None,
) -> _Output:
    """Stdout line by line: logged, kept up to `cap_bytes`, shown to `on_line` (which may stop
    the run), until its end or a grace past the deadline."""
    out = _Output([])
    size = 0
    try:
        assert proc.stdout is not None
        # Raw bytes in chunks: one endless line never sits whole in memory.
        for line in bounded_lines(proc.stdout, line_cap_bytes):
            if log is not None:
                log.write(line)
            if size < cap_bytes:
                out.chunks.append(line)
                size += len(line)
            else:
                out.truncated = True
            if on_line is not None and out.stopped is None:
                out.stopped = on_line(line.rstrip("\n"))
                if out.stopped:
                    kill_group(proc)
            if time.monotonic() > deadline + _GRACE_S:
                break
    finally:
        if log is not None:
            log.close()
    return out


def _reap(proc: TreeProcess[str], guard: _Guard) -> int | None:
    """The exit code, once the whole tree has ended and the pipes are closed."""
    try:
        exit_code: int | None = proc.wait(timeout=_GRACE_S * 2)
    except subprocess.TimeoutExpired:
        kill_group(proc, force=True)
        exit_code = proc.wait()
    # A child that kept our pipes open must not outlive its leader.
    kill_group(proc, force=True)
    guard.err_reader.join(timeout=1.0)
    for stream in (proc.stdout, proc.stderr, proc.stdin):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.close()
    return exit_code


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
