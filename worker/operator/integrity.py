"""What `worker status` adds about integrity: the files set aside (`rejected/`, with their
reasons), the claims and their leases, and on request the database's own check.

Nothing here repairs anything: a claim past its lease is shown, and the next run's recovery
step (`Store.recover_claim`) gives its task back.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from worker.config import Settings
from worker.state.fsutil import json_files
from worker.state.store import Store


def quarantined(settings: Settings) -> list[dict[str, Any]]:
    """Every file set aside in a `rejected/` folder (inbox and wait states), with its reason."""
    found = []
    for kind, folder in (
        ("inbox", settings.inbox / "rejected"),
        ("wait state", settings.wait_states / "rejected"),
    ):
        for path in _set_aside(folder):
            found.append({"kind": kind, "file": str(path), "reason": _reason(path)})
    return found


def _set_aside(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_file() and not _is_reason(p))
    except OSError:
        return []


def _is_reason(path: Path) -> bool:
    return path.name.endswith(".reason.txt")


def _reason(path: Path) -> str:
    try:
        return path.with_name(path.name + ".reason.txt").read_text(encoding="utf-8").strip()
    except OSError:
        return "(no reason recorded)"


def claims(
    settings: Settings, store: Store | None, now: float | None = None
) -> list[dict[str, Any]]:
    """Active claims with their leases, and messages in `inbox/claimed/` this workspace's
    database holds no claim on (another workspace sharing the inbox has them, or nobody)."""
    now = time.time() if now is None else now
    rows = store.active_claims() if store is not None else []
    out = []
    files = set()
    for row in sorted(rows, key=lambda r: r["claimed_at"]):
        detail = json.loads(row["detail"] or "{}")
        if row["source"] == "inbox":
            files.add(str(detail.get("held") or detail.get("file") or f"{row['task_id']}.json"))
        out.append(
            {
                "task_id": row["task_id"],
                "source": row["source"],
                "machine_id": row["machine_id"],
                "run_id": row["run_id"],
                "pid": row["pid"],
                "claimed_at": row["claimed_at"],
                "lease_until": row["lease_until"],
                "lease_left_s": round(row["lease_until"] - now),
                "expired": row["lease_until"] <= now,
            }
        )
    for path in json_files(settings.inbox / "claimed"):
        if path.name not in files:
            try:
                since = path.stat().st_mtime
            except OSError:
                continue  # released meanwhile
            out.append(
                {
                    "task_id": path.stem,
                    "source": "inbox",
                    "machine_id": None,
                    "run_id": None,
                    "pid": None,
                    "claimed_at": since,
                    "lease_until": None,
                    "lease_left_s": None,
                    "expired": None,  # not ours to judge: no claim in this database
                }
            )
    return out


def check_database(settings: Settings) -> dict[str, Any]:
    """`PRAGMA integrity_check` and the journal mode of the database (read-only)."""
    if not settings.db_path.exists():
        return {"ok": True, "integrity": "no database yet", "journal_mode": None}
    import sqlite3  # only with a database to check

    try:
        db = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True, timeout=5.0)
        try:
            problems = [row[0] for row in db.execute("PRAGMA integrity_check")]
            mode = db.execute("PRAGMA journal_mode").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error as exc:
        return {"ok": False, "integrity": f"cannot check: {exc}", "journal_mode": None}
    integrity = "; ".join(problems[:20])
    return {
        "ok": integrity == "ok" and mode == "wal",
        "integrity": integrity,
        "journal_mode": mode,
    }


def status(settings: Settings, check: bool = False) -> dict[str, Any]:
    """`worker status`: the waits and last run, plus quarantined files and claims."""
    from worker.waits.service import status as waits_status

    data = waits_status(settings)
    data["rejected"] = quarantined(settings)
    if settings.db_path.exists():
        with Store(settings.db_path) as store:
            data["claims"] = claims(settings, store)
    else:
        data["claims"] = claims(settings, None)
    if check:
        data["check"] = check_database(settings)
    return data
