"""Phase 0's shortcuts over a thousand waits, each held to the plain path it replaces:

- a wait recorded under the current rules (`validate.RULES`) is read back from its record
  without running the rules again; a record of older rules (or of a database upgraded from
  before rules were recorded) is checked in full, as every record was before;
- `user_approval` answers all its waits at once when no intercom note and no inbox reply
  exists, and asks nothing remote when the run has no GitHub look.

Generated waits (recorded ones of every condition, ready or not, edited files, files worker
never recorded, well-formed or malformed, and a record the current rules refuse) get the same
verdicts, messages, quarantine and ledger entries either way.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from worker.config import Settings, load_settings
from worker.state.store import Store
from worker.waits import intercom, phase0, record
from worker.waits.builtin import UserApproval
from worker.waits.conditions import CheckContext, Waiting
from worker.waits.github_checks import github_approval
from worker.waits.ledger import MIGRATIONS, Ledger
from worker.waits.lookups import Lookups
from worker.waits.record import save_wait
from worker.waits.state import WaitState
from worker.waits.validate import RULES

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)

CONDITIONS = [
    "user_approval",
    "github_decision",
    "intercom_message",
    "roosync_response",
    f"time:{(NOW - timedelta(hours=1)).isoformat()}",  # ready
    f"time:{(NOW + timedelta(hours=1)).isoformat()}",  # not yet
]

MALFORMED = [
    "not json at all",
    json.dumps({"taskId": "x"}),  # most fields missing
    None,  # a well-formed wait with a date in year 9999 (filled in below)
    None,  # an unknown condition
]


def _data(task_id: str, resume_when: str, **fields: object) -> dict[str, object]:
    return {
        "taskId": task_id,
        "timestamp": (NOW - timedelta(minutes=30)).isoformat(),
        "reason": "r",
        "waitFor": "w",
        "resumeWhen": resume_when,
        "context": {"mode": "code-simple", "model": "haiku", "iteration": 1},
        "expiresAt": (NOW + timedelta(days=3)).isoformat(),
        "lastActiveAt": (NOW - timedelta(minutes=30)).isoformat(),
        **fields,
    }


def _generate(settings: Settings, store: Store, seed: int, count: int = 80) -> None:
    """The same waits for the same seed, in any workspace."""
    rng = random.Random(seed)
    folder = settings.wait_states
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        task_id, kind = f"t{n}", rng.choice(["recorded"] * 5 + ["edited", "spec", "malformed"])
        data = _data(task_id, rng.choice(CONDITIONS), approvers=rng.choice([[], ["alice"]]))
        if kind in ("recorded", "edited"):
            path = save_wait(settings, WaitState.model_validate(data), store)
            if kind == "edited":  # an earlier resume time, or the file spoiled
                edit = rng.choice([{"resumeWhen": CONDITIONS[4]}, {"approvers": ["mallory"]}])
                text = json.dumps({**json.loads(path.read_text()), **edit}, indent=2) + "\n"
                path.write_text(rng.choice([text, "{broken"]))
        elif kind == "spec":  # a well-formed file worker never wrote
            (folder / f"{task_id}.json").write_text(json.dumps(data))
        else:
            text = rng.choice(MALFORMED) or json.dumps(
                rng.choice(
                    [
                        {**data, "timestamp": "9999-12-31T23:59:59Z"},
                        {**data, "resumeWhen": "banana"},
                    ]
                )
            )
            (folder / f"{task_id}.json").write_text(text)
    # A record the current rules refuse (a date beyond their range), written as by a worker of
    # older rules: it is checked in full whatever its rules say, and refused as before.
    text = json.dumps(_data("old", "user_approval", timestamp="2300-01-01T00:00:00Z"))
    with store.transaction() as db:
        db.execute(
            "INSERT INTO wait_records(file, task_id, text, saved_at) VALUES (?, ?, ?, 0)",
            ("old.json", "old", text),
        )
    (folder / "old.json").write_text(text)


def _settings(root: Path, name: str) -> Settings:
    ws = root / name
    ws.mkdir()
    return load_settings(ws)


def _outcome(settings: Settings, store: Store) -> dict[str, object]:
    """Everything a scan leaves: its result, the folders, the ledger and the records."""
    result = phase0.scan(settings, store, now=NOW)
    folder = settings.wait_states
    db = store.db
    return {
        "ready": sorted((w.task.id, w.answer, w.ref.name) for w in result.ready),
        "pending": result.pending,
        "errors": result.errors,
        "expired": result.expired,
        "files": sorted((p.name, p.read_text()) for p in folder.glob("*.json")),
        "rejected": sorted(  # a second copy is named with the moment: not compared
            (re.sub(r"\.\d{10,}\.", ".", p.name), p.read_text())
            for p in (folder / "rejected").iterdir()
        ),
        "log": [tuple(r) for r in db.execute("SELECT task_id, code, detail FROM wait_log")],
        "checks": {k: asdict(row) for k, row in Ledger(store).checks().items()},
        "records": sorted(tuple(r) for r in db.execute("SELECT file, text FROM wait_records")),
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_scan_of_waits_checked_when_written_ends_as_the_plain_scan(
    workspace: Path, tmp_path: Path, seed: int
) -> None:
    """Two workspaces with the same generated waits: in one every record is of older rules
    (each checked in full on reading), in the other of the current ones (read back without
    it). Twice each, as on two runs: the same verdicts, messages, quarantine and ledger."""
    plain, fast = _settings(tmp_path, "plain"), _settings(tmp_path, "fast")
    with Store(plain.db_path) as plain_db, Store(fast.db_path) as fast_db:
        _generate(plain, plain_db, seed)
        _generate(fast, fast_db, seed)
        with plain_db.transaction() as db:
            db.execute("UPDATE wait_records SET rules = 0")
        assert not record.recorded(plain, plain_db).checked
        assert record.recorded(fast, fast_db).checked
        for _ in range(2):
            expected, got = _outcome(plain, plain_db), _outcome(fast, fast_db)
            assert got == expected
    assert expected["rejected"] and expected["ready"] and expected["errors"]
    assert any("unreadable record" in e for e in got["errors"])  # type: ignore[attr-defined]


def test_each_file_checks_the_same_against_records_of_either_rules(
    workspace: Path, tmp_path: Path
) -> None:
    """`record.check` on every generated file: the same wait and the same problem, whether
    its record is taken as checked when written or checked again."""
    settings = _settings(tmp_path, "one")
    with Store(settings.db_path) as store:
        _generate(settings, store, seed=7, count=120)
        records = record.recorded(settings, store)
    checked = records.checked
    assert checked and "old.json" not in checked
    refused = []
    for path in sorted(settings.wait_states.glob("*.json")):
        try:
            plain = record.check(path, dict(records))
        except ValidationError:  # a record the rules refuse: phase 0 names it unreadable
            with pytest.raises(ValidationError):
                record.check(path, records)
            refused.append(path.name)
            continue
        assert record.check(path, records) == plain, path.name
    assert refused == ["old.json"]


def test_records_of_older_rules_and_of_an_upgraded_database_are_checked_in_full(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wait saved now carries the current rules; a row written without them (an older
    worker, a database upgraded to the rules column) is not among the checked ones, and no
    record is once the rules change."""
    settings = _settings(tmp_path, "up")
    with Store(settings.db_path) as store:
        path = save_wait(settings, WaitState.model_validate(_data("new", "user_approval")), store)
        with store.transaction() as db:
            db.execute(
                "INSERT INTO wait_records(file, task_id, text, saved_at) VALUES (?, ?, ?, 0)",
                ("older.json", "older", path.read_text()),
            )
        rows = dict(store.db.execute("SELECT file, rules FROM wait_records").fetchall())
        records = record.recorded(settings, store)
        with monkeypatch.context() as changed:
            changed.setattr(record, "RULES", RULES + 1)
            assert not record.recorded(settings, store).checked
    assert rows == {"new.json": RULES, "older.json": 0}
    assert records.checked == {"new.json"}
    # A read-only reader (a dry run) sees the same, and checks every record anew once the
    # rules change.
    read_only = record.recorded(settings)
    assert read_only == records and read_only.checked == {"new.json"}
    monkeypatch.setattr(record, "RULES", RULES + 1)
    assert not record.recorded(settings).checked


def test_a_read_only_reader_of_a_database_not_yet_upgraded_checks_its_records_in_full(
    workspace: Path, tmp_path: Path
) -> None:
    """A dry run against a database of the records' first version (no rules kept, upgraded
    by the next real run) finds every record, none taken as checked."""
    settings = _settings(tmp_path, "v2")
    text = json.dumps(_data("v2", "user_approval"))
    with Store(settings.db_path) as store:
        store.ensure("waits", MIGRATIONS[:2])
        with store.transaction() as db:
            db.execute(
                "INSERT INTO wait_records(file, task_id, text, saved_at) VALUES (?, ?, ?, 0)",
                ("v2.json", "v2", text),
            )
    records = record.recorded(settings)
    assert records == {"v2.json": text} and not records.checked


def _waits(settings: Settings, store: Store, count: int) -> list[Waiting]:
    found = []
    for n in range(count):
        approvers = [] if n % 2 else ["alice"]
        data = _data(f"a{n}", "user_approval", approvers=approvers)
        path = save_wait(settings, WaitState.model_validate(data), store)
        state = WaitState.model_validate_json(path.read_text())
        found.append(Waiting(path, state, "user_approval"))
    return found


def _plain_user_approval(ctx: CheckContext, waits: list[Waiting]) -> list[object]:
    """What `UserApproval.check` did before its shortcuts: each wait's local look, then the
    GitHub look at those still pending, merged."""
    out = [UserApproval()._local(ctx, wait) for wait in waits]
    pending = [i for i, verdict in enumerate(out) if verdict.answer is None]
    for index, verdict in zip(
        pending, github_approval(ctx, [waits[i] for i in pending]), strict=True
    ):
        verdict.ignored = out[index].ignored + verdict.ignored
        verdict.consume = out[index].consume + verdict.consume
        out[index] = verdict
    return out


def test_user_approval_with_no_note_and_no_reply_answers_as_the_plain_path(
    workspace: Path, tmp_path: Path
) -> None:
    settings = _settings(tmp_path, "quiet")
    with Store(settings.db_path) as store:
        waits = _waits(settings, store, 20)
        ctx = CheckContext(settings, NOW, Lookups(settings, store=store))
        assert ctx.lookups.quiet()
        got = UserApproval().check(ctx, waits)
        assert got == _plain_user_approval(ctx, waits)
    assert all(v.answer is None for v in got)


def test_one_note_makes_the_lookups_not_quiet_and_answers_its_wait(
    workspace: Path, tmp_path: Path
) -> None:
    """The shortcut is not taken once a note exists: the approved wait is answered, a note
    from an approver not listed is ignored, the others wait; all as the plain path."""
    settings = _settings(tmp_path, "noted")
    with Store(settings.db_path) as store:
        waits = _waits(settings, store, 6)
        intercom.write_note(settings, "a1", "approval", "go ahead")
        intercom.write_note(settings, "a2", "approval", "me too", by="mallory")
        ctx = CheckContext(settings, datetime.now(UTC), Lookups(settings, store=store))
        assert not ctx.lookups.quiet()
        got = UserApproval().check(ctx, waits)
        plain_ctx = CheckContext(settings, ctx.now, Lookups(settings, store=store))
        assert got == _plain_user_approval(plain_ctx, waits)
    assert got[1].answer is not None and "Approved" in got[1].answer
    assert got[2].answer is None and got[2].ignored[0][0] == "APPROVER_NOT_ALLOWED"
    assert [v.answer for i, v in enumerate(got) if i != 1] == [None] * 5
