"""What worker's prompts cost in model input, against a person driving the same CLI by hand;
prints one JSON object.

The real Claude Code CLI (the version pinned in tests/realcli) runs offline against the
scripted Messages API of tests/fakes/anthropic_api.py on 127.0.0.1, which records every
request. The same scripted model answers both sides the same way: each iteration reads a file,
edits it and ends with a STATUS block.

- by hand (the baseline, measured in the same run): `claude -p "<title and description>"`,
  then `claude -p --resume <session> "continue"` once per further iteration;
- worker: `worker run` on the same task from the inbox, its only mode running the same CLI with
  the same model and permission mode.

Input characters are counted at the API: the JSON of each conversation request's `system`,
`tools` and `messages` (the CLI's side calls, a title or a quota probe, are counted apart).
Runs: 1 iteration, 3 iterations, and 3 iterations with the knowledge store filled past its
budget (its folder beside the workspace, which the CLI sees the same on both sides). Each side
also checks that the prompt cache's prefix stays stable: every conversation request starts
with the whole previous one (the same system and tools, the previous messages unchanged at the
head).

Goals: 3 iterations, worker / by hand <= 1.025; with knowledge at its budget <= 1.20.

    python bench/bench_prompt_tokens.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakes.anthropic_api import (  # noqa: E402 - after the path is set
    AnthropicAPI,
    Turn,
    is_conversation,
    text,
    tool_use,
)

CLAUDE = REPO / "tests" / "realcli" / "node_modules" / ".bin" / "claude"
MODEL = "haiku"
PERMISSION = "acceptEdits"
GOALS = {"3_iterations": 1.025, "3_iterations_knowledge_at_budget": 1.20}
TITLE = "Make divide() refuse a zero divisor"
BODY = (
    "calc.divide(a, 0) returns inf today. It should raise ValueError('division by zero') "
    "instead, with a test in test_calc.py, and the docstring should say so."
)
CALC = (
    '"""A tiny calculator."""\n\n\ndef divide(a, b):\n    """a / b."""\n'
    '    return a / b if b else float("inf")\n'
)
TESTS = "from calc import divide\n\n\ndef test_divide():\n    assert divide(6, 3) == 2\n"
RAISE = "if b == 0:\n        raise ValueError('division by zero')\n    return a / b"
STATUS = "=== AGENT STATUS ===\nSTATUS: {status}\nREASON: {reason}\n==================="


def iteration_turns(ws: Path, n: int, last: bool) -> list[Turn]:
    """One iteration of the scripted model: read a file, edit it, report."""
    zero_test = (
        "assert divide(6, 3) == 2\n\n\ndef test_zero():\n    import pytest\n"
        "    with pytest.raises(ValueError):\n        divide(1, 0)"
    )
    steps = [
        ("calc.py", 'return a / b if b else float("inf")', RAISE),
        ("test_calc.py", "assert divide(6, 3) == 2", zero_test),
        ("calc.py", '"""a / b."""', '"""a / b; raises ValueError when b is 0."""'),
    ]
    name, old, new = steps[(n - 1) % len(steps)]
    path = str(ws / name)
    status = "success" if last else "continue"
    words = f"Step {n} done: {name} changed." + (" The task is complete." if last else "")
    return [
        tool_use("Read", {"file_path": path}),
        tool_use("Edit", {"file_path": path, "old_string": old, "new_string": new}),
        text(f"{words}\n\n" + STATUS.format(status=status, reason=f"step {n} of the task")),
    ]


def script(ws: Path, iterations: int) -> list[Turn]:
    turns: list[Turn] = []
    for n in range(1, iterations + 1):
        turns += iteration_turns(ws, n, n == iterations)
    return turns


def knowledge_docs(folder: Path) -> None:
    """A store larger than its budget: conventions, design and lessons, some on the task."""
    topics = ["division", "errors", "tests", "docstrings", "logging", "network", "storage"]
    for n, topic in enumerate(topics * 3):
        kind = ("conventions", "design", "lessons")[n % 3]
        rules = "\n".join(
            f"{i}. When code touches {topic}, rule {i} of doc {n} applies: keep {topic} "
            f"handling explicit, named and covered by a test that fails without it."
            for i in range(1, 6)
        )
        path = folder / kind / f"{topic}-{n}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {topic.title()} {n}\n\n## Rules\n\n{rules}\n")


def fresh(root: Path, knowledge: bool) -> dict[str, Path]:
    """The same paths for every run (the CLI's system prompt names its working folder)."""
    places = {name: root / name for name in ("ws", "home", "state", "inbox", "knowledge")}
    for path in places.values():
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
    (places["ws"] / "calc.py").write_text(CALC)
    (places["ws"] / "test_calc.py").write_text(TESTS)
    if knowledge:
        knowledge_docs(places["knowledge"])
    return places


def claude_env(api: AnthropicAPI, places: dict[str, Path]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("WORKER_", "ANTHROPIC_", "CLAUDE_"))
    }
    return {**env, **api.env(str(places["home"]))}


def by_hand(root: Path, iterations: int) -> list[dict[str, Any]]:
    """`claude -p TASK`, then `claude -p --resume ID "continue"`: what a person would type."""
    places = fresh(root, knowledge=False)
    api = AnthropicAPI().start()
    try:
        api.script(*script(places["ws"], iterations))
        env = claude_env(api, places)
        session = None
        for n in range(1, iterations + 1):
            prompt = f"{TITLE}\n\n{BODY}" if n == 1 else "continue"
            argv = [str(CLAUDE), "-p", "--output-format", "json", "--model", MODEL]
            argv += ["--permission-mode", PERMISSION]
            if session:
                argv += ["--resume", session]
            done = subprocess.run(
                [*argv, prompt],
                cwd=places["ws"],
                env=env,
                capture_output=True,
                text=True,
                check=False,
                timeout=300,
            )
            if done.returncode != 0:
                raise SystemExit(f"claude by hand failed: {done.stdout}{done.stderr}")
            session = json.loads(done.stdout)["session_id"]
        return [r.body for r in api.requests if r.path.startswith("/v1/messages")]
    finally:
        api.stop()


def through_worker(root: Path, iterations: int, knowledge: bool) -> list[dict[str, Any]]:
    """`worker run` on the same task, its one mode running the same CLI."""
    places = fresh(root, knowledge)
    ws = places["ws"]
    mode = {
        "id": "bench",
        "model": MODEL,
        "maxIterations": max(3, iterations),
        "agent": "claude",
        "permissionMode": PERMISSION,
    }
    (root / "modes.json").write_text(json.dumps({"modes": [mode]}))
    message = {
        "id": "msg-1",
        "from": "alice",
        "to": "bench",
        "subject": TITLE,
        "body": BODY,
        "status": "unread",
        "priority": "normal",
        "created_at": "2026-11-20T10:00:00Z",
    }
    (places["inbox"] / "msg-1.json").write_text(json.dumps(message))
    api = AnthropicAPI().start()
    try:
        api.script(*script(ws, iterations))
        env = {
            **claude_env(api, places),
            "XDG_STATE_HOME": str(places["state"]),
            "LOCALAPPDATA": str(places["state"]),
            "WORKER_MACHINE_ID": "bench",
            "WORKER_INBOX": str(places["inbox"]),
            "WORKER_CLAUDE_BIN": str(CLAUDE),
            "WORKER_MODES_FILE": str(root / "modes.json"),
            "WORKER_REVIEW__KNOWLEDGE_DIR": str(places["knowledge"]),
            "WORKER_FALLBACK__ENABLED": "false",
            # The knowledge store reaches the prompt; no reviewer runs after the task.
            "WORKER_REVIEW__ENABLED": "true" if knowledge else "false",
            "WORKER_REVIEW__STYLE__ENABLED": "false",
            "WORKER_REVIEW__DESIGN__ENABLED": "false",
            "WORKER_REVIEW__KNOWLEDGE__ENABLED": "false",
        }
        argv = [sys.executable, "-m", "worker", "run", "--json", "--workspace", str(ws)]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        report = json.loads(done.stdout or "{}")
        if (report.get("outcome"), report.get("iterations")) != ("success", iterations):
            raise SystemExit(f"worker did not run as scripted: {done.stdout}{done.stderr}")
        return [r.body for r in api.requests if r.path.startswith("/v1/messages")]
    finally:
        api.stop()


def _plain(value: Any) -> Any:
    """The request as the model reads it: without the cache markers (they move to the newest
    message every turn), a message's text as one text block (the CLI sends the newest
    message's text as a list of blocks and the same text as a string afterwards)."""
    if isinstance(value, dict):
        plain = {k: _plain(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(plain.get("content"), str) and "role" in plain:
            plain["content"] = [{"type": "text", "text": plain["content"]}]
        return plain
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def input_chars(body: dict[str, Any]) -> int:
    return sum(
        len(json.dumps(body.get(key), ensure_ascii=False, separators=(",", ":")))
        for key in ("system", "tools", "messages")
    )


def prefix_breaks(calls: list[dict[str, Any]]) -> list[int]:
    """The requests that do not start with the whole previous one."""
    broken = []
    for n in range(1, len(calls)):
        before, after = _plain(calls[n - 1]), _plain(calls[n])
        head = after["messages"][: len(before["messages"])]
        same = before["system"] == after["system"] and before["tools"] == after["tools"]
        if not same or head != before["messages"]:
            broken.append(n)
    return broken


def texts(body: dict[str, Any]) -> list[str]:
    """The texts of a request's messages."""
    found = []
    for message in _plain(body)["messages"]:
        found += [block.get("text", "") for block in message["content"] if isinstance(block, dict)]
    return found


def knowledge_chars(calls: list[dict[str, Any]]) -> int:
    """The size of the `## PROJECT KNOWLEDGE` section in the first request (0 without one)."""
    for said in texts(calls[0]) if calls else []:
        start = said.find("## PROJECT KNOWLEDGE")
        if start >= 0:
            return len(said[start : said.find("\n\n## ", start + 1)])
    return 0


def _head(body: dict[str, Any]) -> str:
    """The CLI's own part of a request: its system prompt and tools, less the version tag of
    its billing header (a digest that differs with the first prompt, the same length)."""
    head = json.dumps([_plain(body.get("system")), _plain(body.get("tools"))])
    return re.sub(r"cc_version=[0-9.]+[0-9a-f]{3};", "cc_version=;", head)


def measure(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [b for b in bodies if is_conversation(b)]
    return {
        "requests": len(calls),
        "input_chars": sum(input_chars(b) for b in calls),
        "side_requests": len(bodies) - len(calls),
        "prefix_breaks": prefix_breaks(calls),
        "knowledge_section_chars": knowledge_chars(calls),
        "head": _head(calls[0]) if calls else None,
    }


def main() -> None:
    if shutil.which("node") is None or not CLAUDE.exists():
        print(
            json.dumps(
                {"skipped": f"no real Claude Code in {CLAUDE}: run `npm ci` in tests/realcli"}
            )
        )
        return
    out: dict[str, Any] = {"cli": "claude (tests/realcli)", "model": MODEL}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        hand = {n: measure(by_hand(root, n)) for n in (1, 3)}
        heads = {n: row.pop("head") for n, row in hand.items()}
        runs = {
            "1_iteration": (1, False),
            "3_iterations": (3, False),
            "3_iterations_knowledge_at_budget": (3, True),
        }
        for name, (iterations, knowledge) in runs.items():
            mine = measure(through_worker(root, iterations, knowledge))
            base = hand[iterations]
            # The CLI's own part (system prompt, tools) is the same on both sides: the
            # difference is what each side types.
            mine["same_system_and_tools_as_by_hand"] = mine.pop("head") == heads[iterations]
            out[name] = {
                "worker": mine,
                "by_hand": base,
                "ratio": round(mine["input_chars"] / base["input_chars"], 3),
                "goal": GOALS.get(name),
            }
    rows = [row for row in out.values() if isinstance(row, dict)]
    # Met: each ratio within its goal, no prefix broken, and the CLI's own part the same.
    out["met"] = all(
        (row["goal"] is None or row["ratio"] <= row["goal"])
        and not row["worker"]["prefix_breaks"]
        and not row["by_hand"]["prefix_breaks"]
        and row["worker"]["same_system_and_tools_as_by_hand"]
        for row in rows
    )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
