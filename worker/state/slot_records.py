"""The records of the slots (`max_parallel`, worker/run/slots.py): which task each slot's run
runs now. Each run writes its slot's record once it claimed its task and removes it as it
ends; a killed run's record stays behind, so a record counts only while its process lives.
Read by the scheduling step, `worker serve`'s pool and the previews (`queue`, `status`, the
dry run)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from worker.config import Settings
from worker.process.platform.process import same_process

log = logging.getLogger(__name__)


def folder(settings: Settings) -> Path:
    return settings.state / "slots"


@dataclass
class SlotRecord:
    """What runs in a slot, written by its holder once it claimed its task."""

    slot: int
    pid: int
    started: str  # the process's start time: a pid in use again is not this run
    run_id: int
    task_id: str
    cap_usd: float


def running(settings: Settings) -> list[SlotRecord]:
    """The records of the slots whose run is alive (a killed run's record is left behind)."""
    records = []
    for path in sorted(folder(settings).glob("slot-*.json")):
        try:
            record = SlotRecord(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as exc:
            log.warning("unreadable slot record %s: %s", path.name, exc)
            continue
        if same_process(record.pid, record.started):
            records.append(record)
    return records
