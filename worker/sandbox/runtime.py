"""Which sandbox runtime this machine has and can run: Anthropic's sandbox runtime (`srt`)
where it is installed with what it needs, else bubblewrap on Linux (files only), and
whether bubblewrap can make its namespaces here.
"""

from __future__ import annotations

import functools
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from worker.process.proc import run_process
from worker.sandbox.settings import SandboxSettings

INSTALL_HINT = (
    "install the sandbox runtime (`npm install -g @anthropic-ai/sandbox-runtime`, the `srt` "
    "command) with bubblewrap, socat and ripgrep (`apt-get install bubblewrap socat ripgrep`)"
)


@dataclass(frozen=True)
class Runtime:
    """A sandbox runtime found on this machine: `srt` or `bwrap`, and what it enforces."""

    name: str
    path: str

    @property
    def network(self) -> bool:
        return self.name == "srt"


def find_runtime(box: SandboxSettings) -> tuple[Runtime | None, str]:
    """The runtime `box` asks for and this machine has and can run, or None and why not."""
    runtime, why = _choose(box)
    if runtime is None or not sys.platform.startswith("linux"):
        return runtime, why
    bwrap = runtime.path if runtime.name == "bwrap" else shutil.which("bwrap") or "bwrap"
    broken = namespaces_problem(bwrap)
    if broken:
        return (
            None,
            f"{runtime.name} cannot run here: bubblewrap cannot make its namespaces ({broken})",
        )
    return runtime, ""


@functools.cache
def namespaces_problem(bwrap: str) -> str | None:
    """Why bubblewrap cannot make its namespaces on this machine (a container without user
    namespaces, Ubuntu's AppArmor rule); None when it can. Asked once per process, and twice
    before saying no: one failure may be a loaded machine's (a timeout, EAGAIN), and a no
    turns the box off for the run or, where it is required, refuses the run."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net"]
    for _ in range(2):
        proc = run_process([*argv, "true"], cwd=Path("/"), timeout_s=30)
        if proc.exit_code == 0:
            return None
    return proc.stderr_tail.strip()[-300:] or f"bwrap exited with {proc.exit_code}"


def _choose(box: SandboxSettings) -> tuple[Runtime | None, str]:
    if box.mode == "off":
        return None, 'the sandbox is off (sandbox.mode = "off")'
    srt = shutil.which(box.srt_bin)
    bwrap = shutil.which(box.bwrap_bin)
    if sys.platform == "win32" and box.runtime != "srt":
        return None, 'on Windows only an explicit sandbox.runtime = "srt" is used (alpha)'
    if srt and box.runtime in ("auto", "srt"):
        missing = _srt_needs()
        if not missing:
            return Runtime("srt", srt), ""
        if box.runtime == "srt":
            return None, f"srt is installed but needs {', '.join(missing)}"
    elif box.runtime == "srt":
        return None, f"`{box.srt_bin}` was not found on PATH"
    if sys.platform.startswith("linux") and bwrap and box.runtime in ("auto", "bwrap"):
        if box.mode == "required":
            return None, f"bubblewrap alone cannot limit the network: {INSTALL_HINT}"
        return Runtime("bwrap", bwrap), ""
    return None, f"no sandbox runtime found: {INSTALL_HINT}"


def _srt_needs() -> list[str]:
    """What the sandbox runtime needs beside itself on this platform (its README)."""
    if not sys.platform.startswith(("linux", "darwin")):
        return []
    needed = ["rg"] if sys.platform == "darwin" else ["bwrap", "socat", "rg"]
    return [name for name in needed if shutil.which(name) is None]
