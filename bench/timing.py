"""Whole-process timing for the benchmarks: runs interleaved with their baseline, medians.

Each measured command runs as a child process; its wall time, CPU time and peak memory come
from the operating system's accounting of that child (`os.wait4`). Commands are run in turn,
baseline first, round after round (A B A B ...), so that a machine growing busier or quieter
weighs on both alike; the ratio is taken pair by pair and its median reported.

`PYTHONDONTWRITEBYTECODE` is removed from the children's environment: with it set, an editable
install compiles worker again on every run (about +35 ms), which is not what users pay. Every
bench says so in its JSON (`bytecode_cache`).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 7  # the least number of runs a median is taken over

# What the libraries worker is built on cost before any of worker runs, in the environment
# worker's command line gives itself (pydantic's plugin scan off, worker/cli/__init__.py):
# importing Typer and pydantic's BaseModel...
LIBRARY_FLOOR = (
    "import os; os.environ['PYDANTIC_DISABLE_PLUGINS'] = '__all__'\n"
    "import typer\n"
    "from pydantic import BaseModel\n"
)
# ...and the least program on them that does what every worker command does: a Typer app of
# two commands, one of them run with worker's options, validating one pydantic model (the
# first model built loads pydantic's plugin machinery, importlib.metadata among it).
APP_FLOOR = (
    LIBRARY_FLOOR
    + """
from pathlib import Path


class Settings(BaseModel):
    workspace: Path


app = typer.Typer(add_completion=False)


@app.command()
def run(workspace: Path = Path("."), dry_run: bool = False, json: bool = False) -> None:
    Settings(workspace=workspace)


@app.command()
def status(workspace: Path = Path("."), json: bool = False) -> None:
    Settings(workspace=workspace)


app()
"""
)


@dataclass(frozen=True)
class Sample:
    wall_s: float
    cpu_s: float
    peak_mb: float
    exit_code: int


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without WORKER_* settings or PYTHONDONTWRITEBYTECODE, plus `extra`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("WORKER_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(extra or {})
    return env


def environment_note() -> dict[str, object]:
    return {
        "bytecode_cache": "on (PYTHONDONTWRITEBYTECODE unset for the measured processes)",
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "rounds_interleaved": True,
    }


def run(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> Sample:
    """One run of `argv`, its output thrown away; the OS's figures for that process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    peak_kb = usage.ru_maxrss if sys.platform != "darwin" else usage.ru_maxrss / 1024
    return Sample(wall, usage.ru_utime + usage.ru_stime, peak_kb / 1024, proc.returncode)


def interleaved(
    commands: dict[str, list[str]],
    env: dict[str, str],
    rounds: int = ROUNDS,
    warmup: int = 1,
    cwd: Path | None = None,
) -> dict[str, list[Sample]]:
    """Each command once per round, in the given order, after `warmup` uncounted rounds."""
    samples: dict[str, list[Sample]] = {name: [] for name in commands}
    for n in range(warmup + rounds):
        for name, argv in commands.items():
            sample = run(argv, env, cwd)
            if n >= warmup:
                samples[name].append(sample)
    return samples


def summary(samples: list[Sample], baseline: list[Sample] | None = None) -> dict[str, object]:
    """Medians of one command's runs, and against a baseline the median of the pairwise
    ratios of wall and CPU time."""
    out: dict[str, object] = {
        "runs": len(samples),
        "wall_s": round(statistics.median(s.wall_s for s in samples), 4),
        "cpu_s": round(statistics.median(s.cpu_s for s in samples), 4),
        "peak_mb": round(max(s.peak_mb for s in samples), 1),
        "exit_codes": sorted({s.exit_code for s in samples}),
    }
    if baseline is not None:
        out["ratio_wall"] = ratio(samples, baseline)
        out["ratio_cpu"] = ratio(samples, baseline, cpu=True)
    return out


def ratio(samples: list[Sample], baseline: list[Sample], cpu: bool = False) -> float:
    """The median of the ratios of wall (or CPU) time, round by round."""
    pairs = zip(samples, baseline, strict=True)
    if cpu:
        return round(statistics.median(a.cpu_s / b.cpu_s for a, b in pairs), 2)
    return round(statistics.median(a.wall_s / b.wall_s for a, b in pairs), 2)


def worker(*args: str) -> list[str]:
    return [sys.executable, "-m", "worker", *args]
