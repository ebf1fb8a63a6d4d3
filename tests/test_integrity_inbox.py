"""Inbox integrity: ids identify messages, `done/` is never a source except through
`--task-id`, an expired claim comes back in one step and by the inbox alone (never by the
kernel after its decision), replies go to `outbox/`, and unusable folders or files get clear
words."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worker.config import load_settings
from worker.errors import ConfigError
from worker.kernel import staleness
from worker.models import Task
from worker.modes import load_modes
from worker.run.runner import RunOptions, run_once
from worker.sources.inbox import InboxSource
from worker.state.store import Store

from .conftest import FakeAgent, aged, needs_posix, run_worker, state_of, write_message

pytestmark = pytest.mark.usefixtures("only_the_task")


def test_a_new_message_reusing_a_finished_ones_file_name_runs_and_its_sender_is_answered(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    write_message(workspace, "first", subject="first task")
    assert run_once(load_settings(workspace)).task_id == "first"
    path = write_message(workspace, "second", subject="second task", **{"from": "bob"})
    path.rename(workspace / "inbox" / "first.json")  # the old file name, a new id
    report = run_once(load_settings(workspace))
    assert (report.task_id, report.outcome.value) == ("second", "success")
    reply = json.loads((workspace / "inbox" / "outbox" / "second-success-reply.json").read_text())
    assert reply["to"] == "bob"
    done = {json.loads(p.read_text())["id"] for p in (workspace / "inbox" / "done").iterdir()}
    assert done == {"first", "second"}
    assert not list((workspace / "inbox").glob("*.json")), "replies are not in the inbox"


def test_a_repeated_id_is_still_a_duplicate_whatever_its_file_name(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    write_message(workspace, "once")
    run_once(load_settings(workspace))
    copy = write_message(workspace, "once")
    copy.rename(workspace / "inbox" / "once (1).json")  # a synced drive's conflicted copy
    assert run_once(load_settings(workspace)).outcome.value == "idle"
    reason = workspace / "inbox" / "rejected" / "once (1).json.reason.txt"
    assert "duplicate" in reason.read_text()


def test_task_id_reruns_a_finished_message_on_a_fresh_copy_and_done_is_never_listed(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    write_message(workspace, "msg-r")
    run_once(load_settings(workspace))
    assert run_once(load_settings(workspace)).outcome.value == "idle"  # done/ is no source
    report = run_once(load_settings(workspace), RunOptions(task_id="msg-r"))
    assert (report.task_id, report.outcome.value) == ("msg-r", "success")
    assert len(fake_claude.task_calls) == 2
    assert json.loads((workspace / "inbox" / "done" / "msg-r.json").read_text())["id"] == "msg-r"
    assert not list((workspace / "inbox" / "claimed").glob("*.json"))
    assert not list((workspace / "inbox").glob("*.json"))


def test_a_stale_listing_never_takes_a_finished_message_back_out_of_done(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """Another worker sharing the inbox lists a message, this one finishes it, then the other
    acts on its old listing: its claim fails and nothing moves under anyone's feet."""
    write_message(workspace, "raced")
    settings = load_settings(workspace)
    with Store(workspace / "other.db") as other:
        late = InboxSource(settings, other)
        (task,) = late.list().tasks
        assert run_once(settings).task_id == "raced"
        assert late.claim(task, run_id=1) is False
        assert other.claim_of("raced") is None  # the file was gone: no lease was even taken
    assert (workspace / "inbox" / "done" / "raced.json").exists()
    assert not list((workspace / "inbox").glob("*.json"))


def _expired_claim(workspace: Path) -> tuple[InboxSource, Store]:
    settings = load_settings(workspace, lease_seconds=1)
    store = Store(settings.db_path)
    source = InboxSource(settings, store)
    (task,) = source.list().tasks
    assert source.claim(task, run_id=1)
    store.db.execute("UPDATE claims SET lease_until = ?", (time.time() - 5,))
    return source, store


def test_a_lease_that_runs_out_after_the_inbox_looked_comes_back_in_a_run_that_says_so(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease runs out between the inbox's own recovery and the kernel's look (a loaded
    machine): the kernel leaves the inbox's claim to the inbox (it would release it after its
    decision, and the task would come back a run later without its reason); the next run
    gives the message back and takes it with LEASE_EXPIRED, once."""
    write_message(workspace, "late")
    _, store = _expired_claim(workspace)
    store.db.execute("UPDATE claims SET lease_until = ?", (time.time() + 3600,))
    store.close()
    recover = InboxSource.recover_expired

    def expires_just_after(self: InboxSource) -> list[str]:
        found = recover(self)
        assert self.store is not None
        self.store.db.execute("UPDATE claims SET lease_until = ?", (time.time() - 1,))
        return found

    with monkeypatch.context() as patched:
        patched.setattr(InboxSource, "recover_expired", expires_just_after)
        first = run_once(load_settings(workspace))
    assert first.task_id is None and "STALE_CLEANUP" not in first.reason_codes
    assert (workspace / "inbox" / "claimed" / "late.json").exists()  # still the inbox's
    second = run_once(load_settings(workspace))
    assert (second.task_id, second.outcome.value) == ("late", "success")
    assert "LEASE_EXPIRED" in second.reason_codes
    assert [json.loads(p.read_text())["id"] for p in (workspace / "inbox" / "done").iterdir()] == [
        "late"
    ]


def test_the_kernel_staleness_step_releases_the_claims_of_sources_without_files(
    workspace: Path,
) -> None:
    """A GitHub task's expired claim (nothing to move) is released by the kernel's step."""
    with Store(load_settings(workspace).db_path) as store:
        assert store.claim("github:o/r#4", "github", "m", 1, 1)
        store.db.execute("UPDATE claims SET lease_until = ?", (time.time() - 5,))
        found = staleness.find(load_settings(workspace), store)
        assert [(item.kind, item.id, item.rule) for item in found] == [
            ("claim", "github:o/r#4", "LEASE_EXPIRED")
        ]
        assert staleness.clean_claim(store, "github:o/r#4").startswith("claim released")
        assert store.claim_of("github:o/r#4")["state"] == "expired"  # type: ignore[index]


def test_a_recovery_that_fails_to_move_the_file_keeps_the_claim_for_the_next_try(
    workspace: Path,
) -> None:
    write_message(workspace, "again")
    source, store = _expired_claim(workspace)

    def broken(claim: dict[str, object]) -> None:
        raise OSError("disk gone")

    with store:
        with pytest.raises(OSError):
            store.recover_claim("again", broken)
        assert store.claim_of("again")["state"] == "active"  # still expired, still ours
        assert source.recover_expired() == ["again"]
        assert (workspace / "inbox" / "again.json").exists()


def test_status_lists_claims_with_their_leases(workspace: Path) -> None:
    write_message(workspace, "held")
    _, store = _expired_claim(workspace)
    store.close()
    (workspace / "inbox" / "claimed" / "elsewhere.json").write_text("{}")
    result = run_worker(workspace, "status", "--json")
    claims = {c["task_id"]: c for c in json.loads(result.stdout)["claims"]}
    assert claims["held"]["expired"] is True and claims["held"]["source"] == "inbox"
    assert claims["elsewhere"]["lease_until"] is None
    text = run_worker(workspace, "status").stdout
    assert "held" in text and "the next run gives it back" in text


def test_a_missing_inbox_folder_is_a_warning(workspace: Path, tmp_path: Path) -> None:
    result = run_worker(workspace, "run", env={"WORKER_INBOX": str(tmp_path / "nowhere")})
    assert result.returncode == 0
    assert "does not exist" in result.stderr and str(tmp_path / "nowhere") in result.stderr


def _run_on_a_read_only_inbox(workspace: Path) -> subprocess.CompletedProcess[str]:
    """`worker run` with the inbox made read-only: by its mode for an ordinary user; for root,
    whom modes do not stop, by a read-only bind mount in a mount namespace of its own."""
    inbox = workspace / "inbox"
    if os.geteuid() != 0:
        inbox.chmod(0o555)
        try:
            return run_worker(workspace, "run")
        finally:
            inbox.chmod(0o755)
    if shutil.which("unshare") is None:
        pytest.skip("running as root without unshare(1) to mount the inbox read-only")
    folder = shlex.quote(str(inbox))
    mount = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}"
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"{mount} && ! touch {folder}/probe"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"running as root, and a read-only bind mount is refused: {probe.stderr!r}")
    command = [sys.executable, "-m", "worker", "run", "--workspace", str(workspace)]
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", f'{mount} && exec "$@"', "sh", *command],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes and mounts")
def test_a_read_only_inbox_is_a_clear_error_naming_the_folder(workspace: Path) -> None:
    write_message(workspace, "ro")
    result = _run_on_a_read_only_inbox(workspace)
    assert "read-only" in result.stderr and str(workspace / "inbox") in result.stderr
    assert "unexpected" not in result.stderr
    assert (workspace / "inbox" / "ro.json").exists()


@needs_posix("a symbolic link without privileges")
def test_an_inbox_where_claims_cannot_be_written_is_a_clear_error(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """(Also as root:) `claimed/` cannot be created: a configuration error naming the folder,
    the message left where it was, no claim held."""
    write_message(workspace, "blocked")
    (workspace / "inbox" / "claimed").symlink_to(workspace / "gone")  # cannot be a folder
    result = run_worker(workspace, "run", env=fake_claude.env())
    assert result.returncode == 78, result.stderr
    assert str(workspace / "inbox") in result.stderr and "unexpected" not in result.stderr
    assert (workspace / "inbox" / "blocked.json").exists()
    with Store(state_of(workspace) / "worker.db") as store:
        assert store.active_claims() == []


def test_files_that_are_not_json_messages_are_set_aside_with_their_reason(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    (workspace / "inbox" / "notes.txt").write_text("call bob")
    (workspace / "inbox" / "garbage.json").write_text("this is not json")
    (workspace / "inbox" / "upload.json.part").write_text("{")  # a sync client's, left alone
    aged(*(workspace / "inbox").iterdir())
    write_message(workspace, "fine")
    assert run_once(load_settings(workspace)).task_id == "fine"
    rejected = workspace / "inbox" / "rejected"
    assert "not a message" in (rejected / "notes.txt.reason.txt").read_text()
    assert "not JSON" in (rejected / "garbage.json.reason.txt").read_text()
    assert (workspace / "inbox" / "upload.json.part").exists()


def test_two_default_modes_are_an_error(tmp_path: Path) -> None:
    mode = {"model": "haiku", "maxIterations": 1, "default": True}
    path = tmp_path / "modes.json"
    path.write_text(json.dumps({"modes": [{"id": "a", **mode}, {"id": "b", **mode}]}))
    with pytest.raises(ConfigError, match="2 modes say default: a, b"):
        load_modes(path)


def test_an_unknown_mode_in_a_message_falls_back_with_a_warning(
    workspace: Path, fake_claude: FakeAgent, caplog: pytest.LogCaptureFixture
) -> None:
    write_message(workspace, "odd-mode", mode="turbo")
    report = run_once(load_settings(workspace))
    assert report.outcome.value == "success" and report.mode_reason == "MODE_UNKNOWN"
    assert "'turbo'" in caplog.text and "does not define" in caplog.text
    with Store(state_of(workspace) / "worker.db") as store:
        assert "MODE_UNKNOWN" in store.recent_decisions(1)[0]["reason_codes"]
    modes = load_modes(None)
    assert modes.detect(Task(id="t", source="inbox", title="x", mode="turbo"))[1] == "MODE_UNKNOWN"


def test_an_expired_rerun_drops_its_fresh_copy_and_leaves_done_as_it_was(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """A `--task-id` rerun that died: its copy in `claimed/` goes, nothing lands in the inbox
    (where it would be a duplicate), and the finished message stays in `done/`."""
    write_message(workspace, "twice")
    run_once(load_settings(workspace))
    settings = load_settings(workspace, lease_seconds=1)
    with Store(settings.db_path) as store:
        source = InboxSource(settings, store)
        task = source.find("twice")
        assert task is not None and task.ref["origin"] == "done"
        assert source.claim(task, run_id=9)
        assert (workspace / "inbox" / "claimed" / "twice.json").exists()
        store.db.execute("UPDATE claims SET lease_until = ?", (time.time() - 5,))
        assert source.recover_expired() == ["twice"]
    assert not list((workspace / "inbox" / "claimed").glob("*.json"))
    assert not list((workspace / "inbox").glob("*.json"))
    assert (workspace / "inbox" / "done" / "twice.json").exists()
