"""The supervisor-loop spec's eight tests, in worker's terms (seeds/001, "Testing Criteria").

Each drives the live `Supervisor` through its `TaskSupervisor` contract: events through
`on_event`, iterations through `after_iteration`, the way the task loop does.
"""

from __future__ import annotations

from pathlib import Path

from worker.config import load_settings
from worker.supervision.factory import make_supervisor
from worker.supervision.protocol import NullSupervisor
from worker.supervision.supervisor import Supervisor

from .test_supervision_kit import TASK, Stream, feed, sentences, supervisor, view


def test_1_passthrough_when_supervision_is_off(tmp_path: Path) -> None:
    """`enabled = false` gives the NullSupervisor: nothing checked, written or injected."""
    (tmp_path / "worker.toml").write_text("[supervision]\nenabled = false\n")
    settings = load_settings(tmp_path)
    sup = make_supervisor(settings, TASK, 1)
    assert isinstance(sup, NullSupervisor)
    looping = Stream()
    for _ in range(20):
        looping.tool("Bash", {"command": "make"}, error="Exit code 2\nmake: *** [all] Error 1")
    assert all(sup.on_event(event) is None for event in looping.events)
    assert sup.after_iteration(view()) == [] and sup.finish("failure") == []
    assert not settings.reports.exists()


def test_1b_supervision_is_on_by_default_and_builds_the_real_supervisor(tmp_path: Path) -> None:
    """Without a `[supervision]` section the factory gives the real supervisor."""
    sup = make_supervisor(load_settings(tmp_path), TASK, 1)
    assert isinstance(sup, Supervisor)


def test_2_a_normal_task_gets_no_steering(tmp_path: Path) -> None:
    """Distinct calls, a file change, rising but modest context: checks run, nothing injected."""
    sup = supervisor(tmp_path)
    stream = Stream().session().say("I will read the parser, fix it, and run the tests.")
    stream.tool("Read", {"file_path": "parser.py"}).tool(
        "Edit", {"file_path": "parser.py", "old_string": "a", "new_string": "b"}
    ).tool("Bash", {"command": "pytest -q"}).usage(60_000)
    assert feed(sup, stream) is None
    assert sup.after_iteration(view(changed=("parser.py",))) == []
    assert sup.finish("success") == []


def test_3_stall_after_three_iterations_without_progress() -> None:
    """Three iterations without a file change (Magentic-One's 3) earn a stall message that
    names the count and the last STATUS reason."""
    sup = supervisor()
    assert sup.after_iteration(view(1)) == []
    assert sup.after_iteration(view(2)) == []
    lines = sup.after_iteration(view(3, reason="tests still red"))
    assert len(lines) == 1
    assert lines[0].startswith("[SUPERVISOR] Stall: 3 iterations")
    assert "tests still red" in lines[0] and sentences(lines[0]) <= 3


def test_3b_progress_decrements_the_stall_counter_rather_than_resetting_it() -> None:
    """Magentic-One's rule: one change after a long stall does not wipe it out."""
    sup = supervisor(cooldown_turns=0)
    for i in (1, 2, 3, 4):
        sup.after_iteration(view(i))  # counter 4
    assert sup.after_iteration(view(5, changed=("a.py",))) != []  # 3: still stalled
    assert sup.after_iteration(view(6, changed=("a.py", "b.py"))) == []  # 2


def test_4_loop_the_same_failing_call_three_times() -> None:
    """Three identical calls (only the volatile `description` differs) give a `[SUPERVISOR]`
    loop message naming tool, arguments and count: not the tool advisor's `Tool guidance:`."""
    sup = supervisor()
    stream = Stream()
    for words in ("Run the build", "Build again", "Try the build"):
        stream.tool("Bash", {"command": "make all", "description": words}, error="Exit code 2")
    assert feed(sup, stream) is None  # a nudge, not a stop: 3 < 5
    lines = sup.after_iteration(view(changed=("x",)))
    loop = next(line for line in lines if "Loop:" in line)
    assert loop.startswith("[SUPERVISOR] Loop: you called Bash")
    assert '{"command":"make all"}' in loop and "3 times" in loop
    assert not loop.startswith("Tool guidance:") and sentences(loop) <= 3


def test_5_context_exhaustion_warns_at_80_and_is_urgent_at_90() -> None:
    """Fill is the turn's input tokens over the model's window (200k by default)."""
    sup = supervisor()
    feed(sup, Stream().session("claude-sonnet-4-5").usage(150_000))
    assert sup.after_iteration(view(1, changed=("a",))) == []  # 75%
    feed(sup, Stream().usage(165_000))
    (warn,) = sup.after_iteration(view(2, changed=("a", "b")))
    assert warn.startswith("[SUPERVISOR] Context filling up: 82%")
    feed(sup, Stream().usage(185_000))
    (urgent,) = sup.after_iteration(view(3, changed=("a", "b", "c")))
    # Urgent re-arms the cooldown: the level rose.
    assert urgent.startswith("[SUPERVISOR] Context nearly exhausted: 92%")
    assert "STATUS" in urgent and sentences(urgent) <= 3


def test_5b_a_1m_model_has_a_1m_window() -> None:
    """`[1m]` in the session's model name (Claude's 1M beta) means a 1,000,000-token window."""
    sup = supervisor()
    feed(sup, Stream().session("claude-opus-4-6[1m]").usage(185_000, model="claude-opus-4-6"))
    assert sup.after_iteration(view(changed=("a",))) == []
    assert sup.watch.detectors.context_window == 1_000_000


def test_6_pace_contingent_gives_the_configured_guidance() -> None:
    """Two mode escalations put PACE at contingent; the message carries the configured plan."""
    plan = "Fall back to the vendored parser and document why."
    sup = supervisor(pace={"guidance": {"contingent": plan}})
    assert sup.after_iteration(view(1, escalations=1, changed=("a",))) == []  # alternate
    (line,) = sup.after_iteration(view(2, escalations=2, changed=("a", "b")))
    assert line.startswith("[SUPERVISOR] PACE contingent: 2 mode escalations")
    assert plan in line and sentences(line) <= 3


def test_6b_pace_emergency_is_exempt_from_the_cooldown() -> None:
    """Emergency tells the agent to stop and report, every iteration, cooldown or not."""
    sup = supervisor()
    first = sup.after_iteration(view(1, escalations=3, changed=("a",)))
    second = sup.after_iteration(view(2, escalations=3, changed=("a", "b")))
    for lines in (first, second):
        assert any(
            line.startswith("[SUPERVISOR] PACE emergency") and "where you got stuck" in line
            for line in lines
        )


def test_7_cooldown_no_repeat_within_three_turns_then_a_repeat() -> None:
    """Stall at iteration 3; not again at 4 and 5 (cooldown 3); again at 6, still stalled."""
    sup = supervisor()
    given = [bool(sup.after_iteration(view(i))) for i in range(1, 8)]
    assert given == [False, False, True, False, False, True, False]


def test_7b_a_growing_streak_re_arms_the_cooldown() -> None:
    """A loop nudged at 3 calls is steered again within the cooldown once it turns urgent."""
    sup = supervisor(stop_on_urgent=False)
    call = {"command": "ls -la"}
    feed(sup, Stream().tool("Bash", call).tool("Bash", call).tool("Bash", call))
    assert any("Loop:" in line for line in sup.after_iteration(view(1, changed=("a",))))
    feed(sup, Stream().tool("Bash", call))  # 4: same level, within the cooldown
    assert not any("Loop:" in line for line in sup.after_iteration(view(2, changed=("b",))))
    feed(sup, Stream().tool("Bash", call))  # 5: urgent
    lines = sup.after_iteration(view(3, changed=("c",)))
    assert any("Loop:" in line and "5 times" in line for line in lines)


def test_8_cascade_three_different_tools_failing() -> None:
    """Read, Bash and Grep failing within five results is a cascade: verify the environment.
    (Issue 19: a success in between would end it, so the Glob that succeeds comes first.)"""
    sup = supervisor()
    stream = Stream().tool("Glob", {"pattern": "*.py"}, output="a.py")
    stream.tool("Read", {"file_path": "/wrong/a"}, error="File does not exist.")
    stream.tool("Bash", {"command": "make"}, error="Exit code 2\nNo rule to make target")
    stream.tool("Grep", {"pattern": "x"}, error="Path does not exist: /wrong")
    feed(sup, stream)
    (line,) = sup.after_iteration(view(changed=("a",)))
    assert line.startswith("[SUPERVISOR] Cascade: 3 different tools failed in the last 5")
    assert "Read, Bash, Grep" in line and "working directory" in line


def test_8b_permission_denials_and_infrastructure_errors_are_counted_apart() -> None:
    """Denied tools are not a cascade of failures, nor are network errors: each has its
    own kind and its own message (Cline and Roo Code leave permission denials out)."""
    sup = supervisor()
    stream = Stream()
    for tool in ("Bash", "WebFetch", "Write"):
        stream.tool(
            tool,
            {"x": tool},
            error=f"Claude requested permissions to use {tool}, but you haven't granted it yet.",
        )
    feed(sup, stream)
    (line,) = sup.after_iteration(view(1, changed=("a",)))
    assert line.startswith("[SUPERVISOR] Permission denials: Bash, WebFetch, Write")
    stream = Stream().tool("WebFetch", {"url": "u"}, error="connect ECONNREFUSED 1.2.3.4:443")
    stream.tool("Bash", {"command": "git fetch"}, error="Could not resolve host: github.com")
    stream.tool("mcp__gh__issue", {"n": 1}, error="503 Service Unavailable")
    feed(sup, stream)
    lines = sup.after_iteration(view(2, changed=("a", "b")))
    assert [line.split(":")[0] for line in lines] == ["[SUPERVISOR] Infrastructure errors"]
