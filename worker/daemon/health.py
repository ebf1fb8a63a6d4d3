"""Health signals between `worker serve` (writes) and `worker supervise` (reads).

The contract is small on purpose, because a candidate revision's `serve` must speak it to the
supervisor of the good revision: three `kv` rows holding JSON, and one file.

- `serve.ready`: written once the loop has started; `token` echoes SUPERVISED_WORKER_TOKEN, the
  value the supervisor put in the child's environment, so a wrapper process (uv run, a shell)
  or a stale row from the previous child cannot be mistaken for this child's readiness.
  (Not WORKER_*: config.py reads every WORKER_* variable as a setting.)
- `serve.heartbeat`: refreshed every `heartbeat_s` by a thread, also during a long agent run.
- `serve.stopped`: written on a clean stop.
- `<state>/daemon/serve.ready`: the same readiness as a file, for systemd/monitoring scripts.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.state.fsutil import atomic_write_text
from worker.state.store import Store

READY_KEY = "serve.ready"
HEARTBEAT_KEY = "serve.heartbeat"
STOPPED_KEY = "serve.stopped"
TOKEN_ENV = "SUPERVISED_WORKER_TOKEN"
REVISION_ENV = "SUPERVISED_WORKER_REVISION"


def ready_file(state_dir: Path) -> Path:
    return state_dir / "daemon" / "serve.ready"


@dataclass(frozen=True)
class Health:
    ready_token: str | None
    ready_at: float | None
    beat_token: str | None
    beat_at: float | None


def _put(store: Store, key: str, value: dict[str, Any]) -> None:
    store.put(key, json.dumps(value, sort_keys=True))


def _get(store: Store, key: str) -> dict[str, Any]:
    raw = store.get(key)
    try:
        value = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def identity(env: dict[str, str] | None = None) -> dict[str, Any]:
    env = dict(os.environ) if env is None else env
    return {
        "pid": os.getpid(),
        "token": env.get(TOKEN_ENV),
        "revision": env.get(REVISION_ENV),
    }


def mark_ready(store: Store, state_dir: Path, **extra: Any) -> None:
    """Say `serve` is up: the kv row first (what the supervisor reads), then the file."""
    record = {**identity(), "at": time.time(), **extra}
    _put(store, READY_KEY, record)
    _put(store, HEARTBEAT_KEY, {**identity(), "at": record["at"], "phase": "ready"})
    atomic_write_text(ready_file(state_dir), json.dumps(record, sort_keys=True) + "\n")


def beat(store: Store, **extra: Any) -> None:
    _put(store, HEARTBEAT_KEY, {**identity(), "at": time.time(), **extra})


def mark_stopped(store: Store, state_dir: Path, reason: str) -> None:
    _put(store, STOPPED_KEY, {**identity(), "at": time.time(), "reason": reason})
    with contextlib.suppress(FileNotFoundError):
        ready_file(state_dir).unlink()


def read(store: Store) -> Health:
    ready = _get(store, READY_KEY)
    hb = _get(store, HEARTBEAT_KEY)
    return Health(
        ready_token=ready.get("token"),
        ready_at=_num(ready.get("at")),
        beat_token=hb.get("token"),
        beat_at=_num(hb.get("at")),
    )


def read_raw(store: Store) -> dict[str, dict[str, Any]]:
    """All three rows, for `worker supervise status`."""
    return {key: _get(store, key) for key in (READY_KEY, HEARTBEAT_KEY, STOPPED_KEY)}


class Heartbeat:
    """A thread that beats every `interval_s` with its own connection (sqlite3 objects stay in
    the thread that made them), so a long agent run still shows the process is alive."""

    def __init__(
        self, open_store: Callable[[], Store], interval_s: float, phase: Callable[[], str]
    ) -> None:
        self._open = open_store
        self._interval = interval_s
        self._phase = phase
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="serve-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval + 5.0)

    def _run(self) -> None:
        store = self._open()
        try:
            while not self._stop.wait(self._interval):
                try:
                    beat(store, phase=self._phase())
                except Exception:  # a busy database must not kill the beat; the next one retries
                    continue
        finally:
            store.close()


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None
