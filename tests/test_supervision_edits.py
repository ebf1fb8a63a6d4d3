"""Issue 41: edits that keep failing on one file, and failures told from a result's text.

Stories of events for each rule (a streak that grows whatever the arguments, what ends it,
what does not), the tools' own failure messages, and the transcripts of
tests/fixtures/transcripts_edits/ (README.md there) in each format the supervisor reads, with
the two real OpenHands runs of the corpus that show the pattern.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from worker.models import AgentEvent
from worker.supervision.anomaly import Anomaly
from worker.supervision.detectors import StreamDetectors
from worker.supervision.edits import edit_target, is_check
from worker.supervision.failtext import text_failure
from worker.supervision.scoring import FLAG_WITHIN, load_index, score
from worker.supervision.steering import message

from .test_supervision_kit import Stream, settings

EDITS = Path(__file__).parent / "fixtures" / "transcripts_edits"
CORPUS = Path(__file__).parent / "fixtures" / "transcripts" / "corpus"
INDEX = load_index(EDITS)
NOT_FOUND = "<tool_use_error>String to replace not found in file.\nString: {}</tool_use_error>"


def replay(events: list[AgentEvent], **values: object) -> list[Anomaly]:
    detectors = StreamDetectors(settings(**values))
    return [anomaly for event in events for anomaly in detectors.observe(event)]


def edits(found: list[Anomaly]) -> list[tuple[str, int]]:
    return [(a.level, a.count) for a in found if a.kind == "edit_failure"]


def failing_edit(stream: Stream, path: str, old: str) -> None:
    stream.tool("Edit", {"file_path": path, "old_string": old, "new_string": "x"}, NOT_FOUND)


def test_failed_edits_of_one_file_grow_one_streak_whatever_the_arguments() -> None:
    """Six Edits of one file, each with another old_string, a Read between two of them: a
    nudge at the fourth, a stop at the sixth, naming the file, the count and the message."""
    stream = Stream()
    for n in range(6):
        failing_edit(stream, "/w/app.py", f"value = {n}")
        if n == 2:
            stream.tool("Read", {"file_path": "/w/app.py"}, output="value = 1")
    found = replay(stream.events)
    assert edits(found) == [("warn", 4), ("warn", 5), ("urgent", 6)]
    last = [a for a in found if a.kind == "edit_failure"][-1]
    assert last.key == "/w/app.py"
    assert last.evidence["file"] == "/w/app.py"
    assert last.evidence["error"].startswith("String to replace not found in file")
    text = message(last, settings())
    assert "6 edits of `/w/app.py`" in text and "String to replace not found" in text


def test_other_failing_edits_between_do_not_end_the_streak() -> None:
    """Failures on app.py with failing edits of another file between them: one streak."""
    stream = Stream()
    for n in range(4):
        failing_edit(stream, "/w/app.py", f"a{n}")
        failing_edit(stream, "/w/other.py", f"b{n}")
    found = replay(stream.events)
    assert {a.key for a in found if a.kind == "edit_failure"} == {"/w/app.py", "/w/other.py"}


def test_fail_read_then_succeed_is_healthy() -> None:
    """A failed Edit, a Read of the file, an Edit that works, on ten files in a row."""
    stream = Stream()
    for n in range(10):
        path = f"/w/m{n}.py"
        failing_edit(stream, path, "x = 1")
        stream.tool("Read", {"file_path": path}, output="x=1")
        stream.tool("Edit", {"file_path": path, "old_string": "x=1", "new_string": "x=2"})
    assert replay(stream.events) == []


def test_a_refactor_of_30_files_with_a_few_failures_is_healthy() -> None:
    stream = Stream()
    for n in range(30):
        path = f"/w/pkg/part{n}.py"
        if n % 8 == 3:
            failing_edit(stream, path, "import old")
            stream.tool("Read", {"file_path": path}, output="from pkg import old")
        stream.tool("Edit", {"file_path": path, "old_string": f"old {n}", "new_string": "new"})
    assert replay(stream.events) == []


def test_a_successful_edit_of_the_file_or_a_passing_check_ends_the_streak() -> None:
    """Three failures, a working edit, three failures; three failures, `pytest` passing,
    three failures: neither is four in a row. A failing check does not end it."""
    for between in (
        ("Edit", {"file_path": "/w/app.py", "old_string": "ok", "new_string": "x"}),
        ("Bash", {"command": "cd /w && pytest -q"}),
    ):
        stream = Stream()
        for n in range(3):
            failing_edit(stream, "/w/app.py", f"first {n}")
        stream.tool(*between)
        for n in range(3):
            failing_edit(stream, "/w/app.py", f"second {n}")
        assert edits(replay(stream.events)) == []
    stream = Stream()
    for n in range(4):
        failing_edit(stream, "/w/app.py", f"value {n}")
        stream.tool("Bash", {"command": "pytest -q"}, error="Exit code 1\n1 failed")
    assert edits(replay(stream.events))[0] == ("warn", 4)


def test_the_thresholds_are_configurable() -> None:
    stream = Stream()
    for n in range(3):
        failing_edit(stream, "/w/app.py", f"value {n}")
    limit = {"edit_failure": {"warn": 2, "urgent": 3}}
    assert edits(replay(stream.events, thresholds=limit)) == [("warn", 2), ("urgent", 3)]


@pytest.mark.parametrize(
    ("text", "name"),
    [
        (
            "ERROR:\nNo replacement was performed, old_str `x = 1` did not appear verbatim in "
            "/workspace/a.py.",
            "No replacement was performed, old_str did not appear verbatim",
        ),
        ("ERROR:\nParameter `old_str` is required for command: str_replace.", "is required"),
        (
            "[Your proposed edit has introduced new syntax error(s). Please understand the "
            "errors and retry your edit command.]\nERRORS:\n/w/App.tsx:3:1: E999",
            "Your proposed edit has introduced new syntax error(s)",
        ),
        ("[No exact match found in /w/App.tsx for\n```\nfoo\n```\n]", "No exact match found"),
        (NOT_FOUND.format("def f():"), "String to replace not found in file"),
        ("Failed to edit, could not find the string to replace.", "Failed to edit"),
        (
            "apply_patch verification failed: Failed to find expected lines in /w/src/lib.rs:",
            "Failed to find expected lines",
        ),
        ("/bin/bash: line 1: cd: web/app: No such file or directory\nREADME.md", "cd: web/app"),
        ("sh: 1: cd: can't cd to web", "cd: can't cd to web"),
        ("Running\nbash: line 1: v: command not found\n", "v: command not found"),
    ],
)
def test_the_tools_own_failure_messages_are_failures(text: str, name: str) -> None:
    assert name in (text_failure(text) or "")


def test_a_result_that_quotes_a_message_further_down_is_no_failure() -> None:
    """A read of a file or a log whose text holds the words below its first lines."""
    body = "\n".join(f"{n}| line" for n in range(5))
    assert text_failure(body + "\nString to replace not found in file.") is None
    assert text_failure("    raise ValueError('did not appear verbatim')") is None
    assert text_failure("The file /w/a.py has been edited.") is None


def test_a_failure_told_from_the_text_counts_for_every_detector() -> None:
    """OpenHands' observations carry no flag: three different str_replace edits that did not
    apply are three failures with one signature (a repeated error, then a failing edit streak);
    `cd x; ls` answered by a failed cd is a failure too."""
    stream = Stream()
    for n in range(4):
        args = {"command": "str_replace", "path": "/w/a.py", "old_str": f"v{n}", "new_str": "w"}
        stream.tool(
            "str_replace_editor",
            args,
            output=f"ERROR:\nNo replacement was performed, old_str `v{n}` did not appear "
            "verbatim in /w/a.py.",
        )
    detectors = StreamDetectors(settings())
    found = [a for event in stream.events for a in detectors.observe(event)]
    assert detectors.tool_failures == 4
    repeated = [a for a in found if a.kind == "repeated_error"]
    assert repeated and repeated[-1].key == (
        "str_replace_editor No replacement was performed, old_str did not appear verbatim"
    )
    assert edits(found) == [("warn", 4)]
    stream = Stream()
    for _ in range(3):
        stream.tool(
            "Bash",
            {"command": "cd web/app; ls"},
            output="/bin/bash: line 1: cd: web/app: No such file or directory\nREADME.md",
        )
    kinds = {a.kind for a in replay(stream.events)}
    assert "repeated_error" in kinds


@pytest.mark.parametrize(
    ("command", "check"),
    [
        ("pytest -q", True),
        ("cd /w && npm run test", True),
        ("CI=1 uv run pytest tests/", True),
        ("cargo build --release 2>&1 | tail", True),
        ("grep -rn pytest .", False),
        ("cat Makefile", False),
        ("echo done", False),
    ],
)
def test_a_check_is_a_test_build_or_lint_run_as_a_command(command: str, check: bool) -> None:
    assert is_check({"command": command}) is check


@pytest.mark.parametrize(
    ("tool", "args", "target"),
    [
        ("Edit", {"file_path": "/w/a.py", "old_string": "x"}, "/w/a.py"),
        ("replace", {"file_path": "/w/a.ts"}, "/w/a.ts"),
        ("file_change", {"changes": [{"path": "src/lib.rs", "kind": "update"}]}, "src/lib.rs"),
        ("str_replace_editor", {"command": "str_replace", "path": "/w/a.py"}, "/w/a.py"),
        ("str_replace_editor", {"command": "view", "path": "/w/a.py"}, None),
        ("str_replace_editor", {"command": "str_replace_editor insert /w/a.py 3"}, "/w/a.py"),
        (
            "run_ipython",
            {"code": "edit_file_by_replace(\n'/w/App.tsx',\nto_replace='a')"},
            "/w/App.tsx",
        ),
        ("bash", {"command": "sed -i 's/a;b/c/' src/x.py"}, "src/x.py"),
        ("bash", {"command": "sed -n '1,5p' src/x.py"}, None),
        ("Read", {"file_path": "/w/a.py"}, None),
    ],
)
def test_an_edit_and_its_file_are_told_from_the_call(
    tool: str, args: dict, target: str | None
) -> None:
    assert edit_target(tool, args) == target


def test_swe_agents_windowed_edit_edits_the_file_it_opened() -> None:
    stream = Stream()
    stream.tool("open", {"command": "open src/parser.py"}, output="[File: src/parser.py]")
    syntax = "Your proposed edit has introduced new syntax error(s). Please read this error."
    for n in range(4):
        stream.tool(
            "edit", {"command": f"edit {n + 1}:{n + 2}\nx = ({n}\nend_of_edit"}, output=syntax
        )
    found = [a for a in replay(stream.events) if a.kind == "edit_failure"]
    assert [(a.key, a.count) for a in found] == [("src/parser.py", 4)]


# -- the transcripts ------------------------------------------------------------------------


def test_the_transcripts_are_what_make_py_writes(tmp_path: Path) -> None:
    copy = tmp_path / "make.py"
    copy.write_text((EDITS / "make.py").read_text(encoding="utf-8"), encoding="utf-8")
    subprocess.run([sys.executable, str(copy)], check=True, cwd=tmp_path)
    for entry in [*INDEX, {"file": "index.json"}]:
        assert (tmp_path / entry["file"]).read_bytes() == (EDITS / entry["file"]).read_bytes()


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_each_transcript_is_judged_as_labelled(entry: dict) -> None:
    """A stuck run flagged within FLAG_WITHIN events of where it turns stuck, by the kind its
    label names; a healthy one without an alarm or a nudge."""
    result = score(EDITS, entry)
    if entry["label"] == "healthy":
        assert (result.alarm, result.warnings) == (None, []), result
    else:
        assert result.flag_delay is not None and result.flag_delay <= FLAG_WITHIN, result
        assert entry["stuck_kind"] in result.warnings, result


def test_the_pattern_is_caught_in_every_format_the_supervisor_reads() -> None:
    """Issue 41's acceptance: a stuck edit-failure run of each format (Claude Code, Codex,
    Gemini CLI, SWE-agent and mini-swe-agent written here; OpenHands real, from the corpus)
    is flagged on time as an edit failure."""
    corpus = [e for e in load_index(CORPUS) if e.get("stuck_kind") == "edit_failure"]
    stuck = [(EDITS, e) for e in INDEX if e["stuck_kind"] == "edit_failure"]
    caught = set()
    for folder, entry in stuck + [(CORPUS, e) for e in corpus]:
        result = score(folder, entry)
        if result.flag_delay is not None and result.flag_delay <= FLAG_WITHIN:
            caught.add(entry["format"])
    assert caught == {"claude", "codex", "gemini", "openhands", "sweagent"}
    assert {e["format"] for e in corpus} == {"openhands"} and len(corpus) == 2


def test_the_index_says_what_each_story_shows() -> None:
    data = json.loads((EDITS / "index.json").read_text(encoding="utf-8"))
    assert {e["label"] for e in data} == {"stuck", "healthy"}
    readme = (EDITS / "README.md").read_text(encoding="utf-8")
    assert all(f"`{e['file']}`" in readme and e["why"] for e in data)
