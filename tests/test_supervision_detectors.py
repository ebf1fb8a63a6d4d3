"""Detectors beyond the spec's eight: oscillation, the radio check, exemptions, overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.config import load_settings
from worker.errors import ConfigError
from worker.models import AgentEvent, EventKind
from worker.supervision.anomaly import Anomaly
from worker.supervision.detectors import StreamDetectors
from worker.supervision.signals import (
    alternation_length,
    canonical_args,
    error_head,
    error_signature,
    failure_class,
)
from worker.supervision.steering import message

from .test_supervision_kit import Stream, feed, sentences, settings, supervisor, view


def kinds(found: list[Anomaly]) -> list[str]:
    return [a.kind for a in found]


def observe_all(stream: Stream, **values: object) -> list[Anomaly]:
    detectors = StreamDetectors(settings(**values))
    return [a for event in stream.events for a in detectors.observe(event)]


def test_oscillation_two_tools_failing_in_turn_warns_at_four() -> None:
    """A fails, B fails, A fails, B fails (the spec; OpenHands warns at 4 when both fail)."""
    stream = Stream()
    for i in range(2):
        stream.tool("Bash", {"command": f"pytest -x {i}"}, error="Exit code 1\nFAILED")
        stream.tool("Edit", {"file_path": "a.py", "old_string": str(i)}, error="not read yet")
    found = [a for a in observe_all(stream) if a.kind == "oscillation"]
    assert found and found[0].count == 4 and found[0].evidence["failing"] is True
    assert found[0].evidence["tools"] == ["Bash", "Edit"]
    assert found[0].start == 0  # the first Bash call's result starts the pattern
    text = message(found[0], settings())
    assert "alternate between Bash and Edit and both keep failing" in text
    assert sentences(text) <= 3


def test_oscillation_of_identical_calls_that_succeed_needs_six() -> None:
    """A-B-A-B-A-B of identical calls (OpenHands 6); five is not yet an oscillation."""
    stream = Stream()
    for i in range(6):
        stream.tool("Read" if i % 2 == 0 else "Bash", {"n": i % 2})
        if i == 4:
            assert "oscillation" not in kinds(observe_all(stream))
    assert "oscillation" in kinds(observe_all(stream))


def test_a_tight_loop_is_cut_short_during_the_iteration() -> None:
    """1,000 identical calls in one iteration: the radio check stops the agent once the
    streak is urgent (5, Gemini CLI's halt), within one check interval of it."""
    sup = supervisor(radio_check_events=4)
    stream = Stream()
    for _ in range(1000):
        stream.tool("Bash", {"command": "sleep 1; cat status.txt"})
    stopped_at = None
    for position, event in enumerate(stream.events):
        reason = sup.on_event(event)
        if reason is not None:
            stopped_at = position
            break
    assert stopped_at is not None
    # The fifth call is event 12 (call, usage, result per tool); the next check is by 16.
    assert 12 <= stopped_at < 16
    assert reason is not None and reason.startswith("supervisor emergency: Loop: you called Bash")
    assert "5 times in a row" in reason
    # The stop is sticky until the iteration ends; then the next prompt gets the steering.
    assert sup.on_event(stream.events[stopped_at + 1]) == reason
    lines = sup.after_iteration(view())
    assert any(line.startswith("[SUPERVISOR] Loop:") for line in lines)
    assert sup.stopped is None


def test_no_stop_when_stop_on_urgent_is_off() -> None:
    sup = supervisor(stop_on_urgent=False, radio_check_events=1)
    stream = Stream()
    for _ in range(50):
        stream.tool("Bash", {"command": "true"})
    assert feed(sup, stream) is None


def test_a_polling_tool_is_exempt() -> None:
    """Claude Code's BashOutput polls a background shell: 30 identical polls are its job."""
    sup = supervisor(radio_check_events=1)
    stream = Stream()
    for _ in range(30):
        stream.tool("BashOutput", {"bash_id": "shell_1"}, output="still running")
    assert feed(sup, stream) is None
    assert not any("Loop" in line for line in sup.after_iteration(view(changed=("a",))))


def test_per_tool_exemption_and_thresholds_from_worker_toml(tmp_path: Path) -> None:
    """`[supervision.tools.X]` exempts a user's polling tool and overrides Bash's loop
    threshold; the other tools keep the defaults."""
    (tmp_path / "worker.toml").write_text(
        "[supervision.tools.wait_for_ci]\nexempt = true\n"
        "[supervision.tools.Bash.loop]\nwarn = 4\nurgent = 8\n"
    )
    sup_settings = load_settings(tmp_path).supervision
    poll, bash, read = Stream(), Stream(), Stream()
    for _ in range(6):
        poll.tool("wait_for_ci", {"run": 1})
    for _ in range(3):
        bash.tool("Bash", {"command": "ls"})
        read.tool("Read", {"file_path": "a"})
    detectors = StreamDetectors(sup_settings)
    assert [a for e in poll.events + bash.events for a in detectors.observe(e)] == []
    assert "loop" in kinds(observe_all(read, **sup_settings.model_dump()))


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("[supervision.thresholds.lop]\nwarn = 3\n", "lop"),
        ("[supervision.thresholds.loop]\nwarn = 5\nurgent = 4\n", "urgent must be greater"),
        ("[supervision]\nradio_check = 3\n", "radio_check"),
        ("[supervision.pace.guidance]\npanic = 'x'\n", "panic"),
    ],
)
def test_bad_supervision_settings_are_a_config_error(
    tmp_path: Path, toml: str, needle: str
) -> None:
    """A typo in `[supervision]` names the key instead of being silently ignored."""
    (tmp_path / "worker.toml").write_text(toml)
    with pytest.raises(ConfigError, match=needle):
        load_settings(tmp_path)


def test_volatile_ids_are_stripped_from_canonical_arguments() -> None:
    """Tool-use ids, UUIDs, timestamps and Bash's prose `description` do not make two calls
    different; the key order does not either."""
    keys = settings().volatile_keys
    one = {
        "command": "cat /tmp/run-3f2a9c1e-1b2c-4d5e-8f90-123456789abc.log",
        "description": "Read the log",
        "id": "toolu_01ABCDEFG",
        "at": "2026-01-02T03:04:05Z",
    }
    two = {
        "at": "2026-02-03T04:05:06.123Z",
        "id": "toolu_99ZZZ",
        "command": "cat /tmp/run-aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee.log",
        "description": "Look at the log again",
    }
    assert canonical_args(one, keys) == canonical_args(two, keys)
    assert canonical_args({"command": "ls a"}, keys) != canonical_args({"command": "ls b"}, keys)


def test_error_signatures_blur_numbers_but_keep_the_error() -> None:
    assert error_signature("Exit code 1\nFAILED t.py\n2 failed in 0.31s") == error_signature(
        "Exit code 2\nFAILED t.py\n3 failed in 1.02s"
    )
    # The whole of the error's own text, not its first or last line: two runs that fail
    # with different output are two errors.
    assert error_signature("Exit code 1\nfoo\n2 failed") != error_signature(
        "Exit code 1\nbar\n2 failed"
    )
    assert error_signature("Exit code 1\nImportError") != error_signature("Exit code 1\nOK?")
    assert failure_class("connect ECONNREFUSED 127.0.0.1:5432") == "infrastructure"
    assert failure_class("The user doesn't want to proceed with this tool use.") == "permission"
    assert failure_class("SyntaxError: invalid syntax") == "cascade"


PTH_NOISE = (
    "Error processing line 1 of /opt/env/lib/python3.9/site-packages/distutils-precedence.pth:\n"
    '\n  Traceback (most recent call last):\n    File "<string>", line 1, in <module>\n'
    "  ModuleNotFoundError: No module named '_distutils_hack'\n\nRemainder of file ignored\n"
)


def test_a_traceback_is_named_by_its_last_line_and_site_noise_is_not_the_error() -> None:
    """Two different Python exceptions are two errors, though both open with "Traceback";
    the .pth warning Python prints before every start in a broken environment (seen in real
    SWE-bench runs) is not the command's error."""
    one = "Traceback (most recent call last):\n  File \"a.py\", line 3\nKeyError: 'x'"
    two = 'Traceback (most recent call last):\n  File "a.py", line 9\nTypeError: bad'
    assert error_signature(one) != error_signature(two)
    assert error_head(PTH_NOISE + "usage: pylint [options]") == "usage: pylint [options]"
    assert error_signature(PTH_NOISE + "E: one") != error_signature(PTH_NOISE + "F: other")


def test_the_same_error_from_different_arguments_is_a_repeated_failure() -> None:
    """Three Edits with different `old_string`s all "not found": the spec's same tool with
    the same error, which the identical-call loop cannot see."""
    stream = Stream()
    for guess in ("def f():", "def f(x):", "def f(x, y):"):
        stream.tool(
            "Edit",
            {"old_string": guess},
            error=f"<tool_use_error>String to replace not found in file.\n{guess}",
        )
    (found,) = [a for a in observe_all(stream) if a.kind == "repeated_error"]
    assert found.count == 3 and found.evidence["error"] == "String to replace not found in file"


def test_a_success_of_the_same_tool_ends_the_repeated_failure() -> None:
    stream = Stream()
    stream.tool("Edit", {"n": 1}, error="not found").tool("Edit", {"n": 2}, error="not found")
    stream.tool("Edit", {"n": 3}).tool("Edit", {"n": 4}, error="not found")
    assert "repeated_error" not in kinds(observe_all(stream))


def test_repeated_assistant_messages_but_not_short_ones() -> None:
    """The same paragraph three times is a monologue (OpenHands 3); "Let me check." is not."""
    para = "I will now check the configuration loader and then the settings module again."
    long, brief = Stream(), Stream()
    for i in range(3):
        long.say(para).tool("Read", {"file_path": f"f{i}"})
        brief.say("Let me check.").tool("Read", {"file_path": f"f{i}"})
    assert "repeated_message" in kinds(observe_all(long))
    assert "repeated_message" not in kinds(observe_all(brief))


def test_context_episode_ends_when_compaction_brings_the_fill_down() -> None:
    detectors = StreamDetectors(settings())
    first = detectors.observe(AgentEvent(EventKind.USAGE, 0, input_tokens=170_000))
    detectors.observe(AgentEvent(EventKind.USAGE, 1, input_tokens=30_000))  # compacted
    later = detectors.observe(AgentEvent(EventKind.USAGE, 2, input_tokens=170_000))
    assert first[0].episode != later[0].episode


def test_turns_without_progress_in_one_long_iteration() -> None:
    """30 turns that learn nothing (each command fails its own way) are a stall inside an
    iteration; 40 turns reading different files, or editing through the shell, are not."""
    stream = Stream()
    for i in range(29):
        stream.tool("Bash", {"command": f"make t{i}"}, error=f"make: *** No rule to make {'x' * i}")
    assert "stall" not in kinds(observe_all(stream))
    stream.tool("Bash", {"command": "make t29"}, error="make: *** No rule to make y")
    assert "stall" in kinds(observe_all(stream))
    research = Stream()
    for i in range(40):
        research.tool("Read", {"file_path": f"m{i}.py"}, output=f"contents of m{i}")
    assert "stall" not in kinds(observe_all(research))
    edited = Stream()
    for i in range(40):
        command = f"sed -i 's/a/b/' m{i}.py" if i % 10 == 9 else "pytest -x"
        edited.tool("Bash", {"command": command}, error=None if i % 10 == 9 else "1 failed")
    assert "stall" not in kinds(observe_all(edited))


def test_alternation_length() -> None:
    assert alternation_length(["a", "b", "a", "b"]) == 4
    assert alternation_length(["c", "a", "b", "a", "b"]) == 4
    assert alternation_length(["a", "a"]) == 1
    assert alternation_length([]) == 0


def test_every_steering_message_is_tagged_and_at_most_three_sentences() -> None:
    """The spec's format: `[SUPERVISOR]`, the anomaly and its evidence, one action."""
    stream = Stream().session()
    for tool in ("Read", "Bash", "Grep"):
        stream.tool(tool, {"x": 1}, error=f"{tool} broke. Badly. Really.")
    for _ in range(6):
        stream.tool("Bash", {"command": "make"}, error="Exit code 2\nmake: *** Error 1")
    for _ in range(3):
        stream.say("The build keeps failing. I will try again. Trying once more now.")
    stream.usage(190_000)
    found = observe_all(stream, stall_turns=3)
    assert {a.kind for a in found} >= {
        "cascade",
        "loop",
        "repeated_error",
        "repeated_message",
        "context",
        "stall",
    }
    for anomaly in found:
        text = message(anomaly, settings())
        assert text.startswith("[SUPERVISOR] ") and sentences(text) <= 3, text
