"""Fuzz over every file worker reads: inbox messages, wait states, modes files, worker.toml.

For messages and wait states, each generated file sits beside a good message in a real
workspace and the runs go on until idle: the generated file is run, left (not ours to run),
or set aside in `rejected/` with a reason, while the good message is done; no run, `status`
or `waits list` raises. A modes file or a worker.toml is accepted or refused with a
ConfigError naming what was wrong, never anything else.

`FUZZ_EXAMPLES=500 python -m pytest tests/test_fuzz_inputs.py` explores further than the
suite's 25 examples per input.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.chaos_kit import drain, drop_messages, make_workspace, settings_of
from worker.config import load_settings
from worker.errors import ConfigError
from worker.kernel.control import is_control_message, unknown_order
from worker.modes import load_modes
from worker.operator.integrity import status
from worker.sources.message import Message
from worker.waits.service import list_waits

from .conftest import aged, needs_posix

FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=30)
)
dates = st.one_of(
    st.sampled_from(
        [
            "2026-11-20T10:00:00Z",
            "9999-12-31T23:59:59Z",
            "0001-01-01T00:00:00",
            "2026-13-40T99:00:00",
            "tomorrow",
            "",
        ]
    ),
    st.datetimes().map(lambda d: d.isoformat()),
    scalars,
)
conditions = st.one_of(
    st.sampled_from(
        ["user_approval", "time", "time:tomorrow", "banana", "intercom_message", "TIME:"]
    ),
    st.text(max_size=20).map(lambda t: f"time:{t}"),
    st.text(max_size=20),
    scalars,
)


def maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(values, scalars)


messages = st.one_of(
    st.binary(max_size=200),
    st.fixed_dictionaries(
        {
            "id": maybe(st.text(min_size=1, max_size=20).filter(lambda t: t != "good")),
            "from": maybe(st.sampled_from(["alice", "fuzz", "", "a\nb"])),
            "to": maybe(st.sampled_from(["all", "fuzz", "other"])),
        },
        optional={
            "subject": maybe(st.text(max_size=40)),
            "body": maybe(st.text(max_size=80)),
            "status": maybe(st.sampled_from(["unread", "read"])),
            "priority": maybe(st.sampled_from(["urgent", "low", 3, 99, -1, "superurgent", True])),
            "kind": st.sampled_from(["control", "note"]),
            "action": maybe(st.sampled_from(["stop", "cancel", "cancle", "explode", ""])),
            "task": maybe(st.just("good")),
            "created_at": dates,
            "thread_id": scalars,
            "in_reply_to": scalars,
            "mode": maybe(st.sampled_from(["quick", "nope"])),
            "extra": scalars,
        },
    ).map(lambda d: json.dumps(d).encode()),
)

waits = st.one_of(
    st.binary(max_size=200),
    st.fixed_dictionaries(
        {"taskId": maybe(st.text(min_size=1, max_size=12)), "resumeWhen": conditions},
        optional={
            "timestamp": dates,
            "expiresAt": dates,
            "resumeAt": dates,
            "lastActiveAt": dates,
            "context": st.one_of(
                st.fixed_dictionaries(
                    {"mode": maybe(st.just("quick")), "model": maybe(st.just("none"))},
                    optional={"iteration": maybe(st.integers(-2, 300))},
                ),
                scalars,
            ),
            "source": maybe(st.sampled_from(["inbox", "github", "wait"])),
            "approvers": maybe(st.lists(st.text(max_size=5), max_size=2)),
        },
    ).map(lambda d: json.dumps(d).encode()),
)


def _ours_to_run(raw: bytes) -> bool:
    try:
        message = Message.model_validate_json(raw)
    except ValueError:
        return False
    return (
        message.to in ("fuzz", "all")
        and message.status == "unread"
        and not message.in_reply_to
        and not (message.thread_id and message.thread_id != message.id)
        and not is_control_message(message)
    )


def _odd_entry(inbox: Path, kind: str | None) -> Path | None:
    """An inbox entry that is no message file: a named pipe, a folder, a link to nothing."""
    path = inbox / "odd.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(inbox / "nowhere.json")
    return path if kind else None


@needs_posix("the recording agent is an sh script")
@FUZZ
@given(raw=messages, odd=st.sampled_from([None, "fifo", "folder", "dangling"]))
def test_a_fuzzed_message_is_run_left_or_set_aside_and_the_good_one_runs(
    raw: bytes, odd: str | None
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = make_workspace(Path(tmp), "fuzz")
        inbox = ws / "inbox"
        drop_messages(inbox, ["good"])
        (inbox / "zz-fuzzed.json").write_bytes(raw)
        aged(inbox / "zz-fuzzed.json")
        entry = _odd_entry(inbox, odd)
        drain(settings_of(ws), max_runs=6)
        assert (inbox / "done" / "good.json").exists()
        assert not list((inbox / "claimed").glob("*")), "nothing stranded"
        assert entry is None or os.path.lexists(entry), "an odd entry is left where it is"
        if (inbox / "rejected" / "zz-fuzzed.json").exists():
            assert (inbox / "rejected" / "zz-fuzzed.json.reason.txt").read_text().strip()
        elif (inbox / "zz-fuzzed.json").exists():
            assert not _ours_to_run(raw), "a message for us is run or set aside"
        if _bad_order(raw):  # never run as a task: set aside, its sender told
            assert (inbox / "rejected" / "zz-fuzzed.json").exists()
            assert "valid actions" in (inbox / "rejected" / "zz-fuzzed.json.reason.txt").read_text()


def _bad_order(raw: bytes) -> bool:
    """A message for us marked as a control message whose action worker does not know."""
    try:
        message = Message.model_validate_json(raw)
    except ValueError:
        return False
    return (
        unknown_order(message) is not None
        and message.to in ("fuzz", "all")
        and message.status == "unread"
        and not message.in_reply_to
        and not (message.thread_id and message.thread_id != message.id)
    )


@needs_posix("the recording agent is an sh script")
@FUZZ
@given(raw=waits)
def test_a_fuzzed_wait_state_is_kept_or_set_aside_and_the_good_message_runs(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = make_workspace(Path(tmp), "fuzz")
        drop_messages(ws / "inbox", ["good"])
        config = settings_of(ws)
        config.wait_states.mkdir(parents=True)
        (config.wait_states / "fuzzed.json").write_bytes(raw)
        status(config)
        list_waits(config)
        drain(config, max_runs=6)
        assert (ws / "inbox" / "done" / "good.json").exists()
        rejected = config.wait_states / "rejected" / "fuzzed.json"
        if rejected.exists():
            assert rejected.with_name("fuzzed.json.reason.txt").read_text().strip()
        assert all(item["reason"] for item in status(config)["rejected"])


mode_files = st.one_of(
    st.binary(max_size=100),
    st.fixed_dictionaries(
        {
            "modes": st.one_of(
                scalars,
                st.lists(
                    st.fixed_dictionaries(
                        {"id": maybe(st.sampled_from(["a", "b"]))},
                        optional={
                            "model": maybe(st.just("haiku")),
                            "maxIterations": maybe(st.integers(-1, 300)),
                            "default": maybe(st.booleans()),
                            "agent": maybe(st.sampled_from(["claude", "command", "x"])),
                            "escalation": st.one_of(
                                scalars,
                                st.fixed_dictionaries({"triggerMode": maybe(st.just("a"))}),
                            ),
                        },
                    ),
                    max_size=3,
                ),
            )
        }
    ).map(lambda d: json.dumps(d).encode()),
)


@FUZZ
@given(raw=mode_files)
@example(raw=b'{"modes": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")  # RecursionError before
def test_a_fuzzed_modes_file_is_accepted_or_refused_with_a_config_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "modes.json"
        path.write_bytes(raw)
        try:
            modes = load_modes(path)
        except ConfigError as exc:
            assert str(exc).startswith(str(path))
            return
        assert modes.modes and sum(m.default for m in modes.modes.values()) <= 1


def _toml(value: Any) -> str:
    """A TOML value: floats as TOML writes them (`inf`, `nan`, `1e+300`), the rest as JSON."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)  # inf, -inf, 1e+300
    return json.dumps(value)


_TOP_KEYS = [
    "machine_id", "lease_seconds", "inbox_dir", "typo", "task_cost_cap_usd",
    "task_wall_clock_s", "iteration_timeout_s", "state_dir", "wait_states_dir",
]  # fmt: skip
toml_values = st.one_of(
    st.integers(),
    st.booleans(),
    st.text(max_size=10),
    st.lists(st.text(max_size=5), max_size=2),
    st.floats(),
    st.sampled_from([1e999, 1e300, 0.5, "box\nother", "a\u2028b"]),
)
toml_files = st.one_of(
    st.text(max_size=80),
    st.dictionaries(
        st.sampled_from(_TOP_KEYS),
        toml_values,
        max_size=3,
    ).map(lambda d: "\n".join(f"{k} = {_toml(v)}" for k, v in d.items())),
    st.dictionaries(
        st.sampled_from(["runs_days", "logs_max_bytes", "enabled", "nope"]),
        toml_values,
        max_size=2,
    ).map(lambda d: "[retention]\n" + "\n".join(f"{k} = {json.dumps(v)}" for k, v in d.items())),
)


@FUZZ
@given(text=toml_files)
@example(text='inbox_dir = ""')  # the workspace itself: refused, naming the file that said so
@example(text="task_wall_clock_s = 1e999")  # infinity, accepted before
@example(text="a = " + "[" * 100_000)  # RecursionError before
def test_a_fuzzed_worker_toml_is_accepted_or_refused_with_a_config_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "worker.toml").write_text(text, encoding="utf-8")
        try:
            loaded = load_settings(Path(tmp), env={})
        except ConfigError as exc:
            assert "worker.toml" in str(exc)
            return
        assert loaded.retention.runs_days > 0 and loaded.lease_seconds > 0
        numbers = (loaded.task_wall_clock_s, loaded.iteration_timeout_s, loaded.task_cost_cap_usd)
        assert all(math.isfinite(n) for n in numbers) and loaded.machine_id.isprintable()
        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:  # pragma: no cover - a parser disagreement
            raise AssertionError("an unparsable worker.toml was accepted") from exc
