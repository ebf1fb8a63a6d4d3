"""Cost of supervision; prints one JSON object.

  inspect_s          `inspect_transcript` over a generated Claude stream-json transcript of
                     N events (read, normalise, detect, report)
  parse_floor_s      the floor: json.loads of each line, nothing kept (keeping every object
                     would let the garbage collector inflate the baseline)
  read_parse_floor_s the file read and split into lines, then json.loads of each line: all
                     that inspect's input asks of any program (the goal is held to the first)
  decode_floor_s     JSONDecoder.raw_decode of each line: the decoding inspect itself does
                     (json.loads adds a type check and two whitespace matches around it;
                     inspect calls the scanner raw_decode wraps)
  normalise_baseline_s  the Claude adapter's own normalisation of those lines (no detection)
  per_event_us       the live supervisor's `on_event` per event (normalised events in memory)
  noop_per_event_us  a NullSupervisor over the same events: the cost of the call itself
  codex, gemini      inspect over the same steps as Codex `exec --json` and Gemini CLI
                     stream-json lines (a call and its result per step), beside their floor

Goal: `worker inspect` >= 200,000 events/s, <= 2.5x the json.loads floor. Each figure is the
median of --repeat runs (at least 7), the measurements taken in turn within each round; the
ratios are what compare across machines. The transcript mixes healthy work with loops,
failures, cascades and context growth, so the detectors do real work.

    python bench/bench_supervision.py [--events 100000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from worker.agents.claude_stream import normalise_lines
from worker.models import Task
from worker.supervision.postmortem import inspect_transcript
from worker.supervision.protocol import NullSupervisor
from worker.supervision.settings import SupervisionSettings
from worker.supervision.supervisor import Supervisor

SESSION = str(uuid.uuid4())


def _assistant(content: list[dict[str, Any]], tokens: int) -> str:
    return json.dumps(
        {
            "type": "assistant",
            "session_id": SESSION,
            "message": {
                "model": "claude-sonnet-4-5-20250929",
                "id": f"msg_{tokens}",
                "role": "assistant",
                "content": content,
                "usage": {
                    "input_tokens": 3,
                    "cache_read_input_tokens": tokens,
                    "output_tokens": 40,
                },
            },
        }
    )


def steps(count: int) -> Iterator[tuple[str, dict[str, Any], str | None, int]]:
    """`count` tool steps: (tool, arguments, error or None, context tokens)."""
    for step in range(1, count + 1):
        phase = step % 200
        if phase < 150:  # ordinary work: reads, edits, tests
            name, args, error = ("Read", {"file_path": f"src/m{step % 37}.py"}, None)
            if step % 9 == 0:
                name, args = "Edit", {"file_path": f"src/m{step % 37}.py", "old_string": str(step)}
        elif phase < 170:  # a tight loop
            name, args, error = "Bash", {"command": "make test", "description": str(step)}, None
        elif phase < 190:  # failing with the same error
            name, args, error = "Edit", {"old_string": f"v{step}"}, "String to replace not found"
        else:  # a cascade
            name = ("Read", "Grep", "Bash", "Glob")[step % 4]
            args, error = {"x": step}, f"{name} failed: No such file or directory"
        yield name, args, error, 20_000 + (step % 5000) * 35  # context grows, is compacted


def transcript(events: int) -> list[str]:
    """About `events` normalised events (3 per tool step: call, usage, result)."""
    lines = [
        json.dumps(
            {
                "type": "system",
                "subtype": "init",
                "session_id": SESSION,
                "model": "claude-sonnet-4-5-20250929",
            }
        )
    ]
    count = 0
    while (1 + 2 * count) * 3 // 2 < events:  # 2 lines (3 events) per step
        count += 1
    for step, (name, args, error, tokens) in enumerate(steps(count), 1):
        tool_id = f"toolu_{step:012d}"
        lines.append(
            _assistant([{"type": "tool_use", "id": tool_id, "name": name, "input": args}], tokens)
        )
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": tool_id,
            "content": error or "ok",
        }
        if error:
            block["is_error"] = True
        lines.append(json.dumps({"type": "user", "message": {"role": "user", "content": [block]}}))
    return lines


def codex_transcript(events: int) -> list[str]:
    """The same steps as `codex exec --json` lines: a command item per step (2 events)."""
    lines = [json.dumps({"type": "thread.started", "thread_id": SESSION})]
    for step, (name, args, error, _) in enumerate(steps(events // 2), 1):
        item = {
            "id": f"item_{step}",
            "type": "command_execution",
            "command": f"{name} {json.dumps(args)}",
            "aggregated_output": error or "ok",
            "exit_code": 1 if error else 0,
            "status": "failed" if error else "completed",
        }
        lines.append(json.dumps({"type": "item.completed", "item": item}))
    return lines


def gemini_transcript(events: int) -> list[str]:
    """The same steps as Gemini CLI stream-json lines: tool_use and tool_result (2 events)."""
    lines = [json.dumps({"type": "init", "session_id": SESSION, "model": "gemini-2.5-pro"})]
    for step, (name, args, error, _) in enumerate(steps(events // 2), 1):
        call = {"type": "tool_use", "tool_name": name, "tool_id": f"t{step}", "parameters": args}
        result: dict[str, Any] = {"type": "tool_result", "tool_id": f"t{step}", "output": "ok"}
        if error:
            result.update(status="error", output="", error={"type": "tool", "message": error})
        else:
            result["status"] = "success"
        lines += [json.dumps(call), json.dumps(result)]
    return lines


def interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """The median time of each function, called in turn round after round."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    return {name: statistics.median(times) for name, times in samples.items()}


def parse_floor(lines: list[str]) -> None:
    for line in lines:
        json.loads(line)


def read_parse_floor(path: Path) -> None:
    for line in path.read_bytes().decode().split("\n"):
        if line:
            json.loads(line)


def decode_floor(lines: list[str]) -> None:
    decode = json.JSONDecoder().raw_decode
    for line in lines:
        decode(line)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    repeat = max(7, options.repeat)
    logging.disable(logging.WARNING)  # the supervisor logs each stop; not the point here
    settings = SupervisionSettings()
    lines = transcript(options.events)
    others = {
        "codex": codex_transcript(options.events),
        "gemini": gemini_transcript(options.events),
    }
    events = list(normalise_lines(lines))
    task = Task(id="bench", source="inbox", title="bench")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "transcript.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        report = inspect_transcript(path, settings)
        paths = {name: Path(tmp) / f"{name}.jsonl" for name in others}
        for name, other in others.items():
            paths[name].write_text("\n".join(other) + "\n", encoding="utf-8")
        counts = {name: inspect_transcript(paths[name], settings).events for name in others}

        def live() -> None:
            sup = Supervisor(settings, task, None, machine_id="bench", reports_dir=None)
            for event in events:
                if sup.on_event(event) is not None:
                    sup.stopped = None  # as if a new iteration began: keep measuring

        def noop() -> None:
            sup = NullSupervisor()
            for event in events:
                sup.on_event(event)

        fns: dict[str, Callable[[], object]] = {
            "inspect": lambda: inspect_transcript(path, settings),
            "parse": lambda: parse_floor(lines),
            "read_parse": lambda: read_parse_floor(path),
            "decode": lambda: decode_floor(lines),
            "normalise": lambda: sum(1 for _ in normalise_lines(lines)),
            "live": live,
            "noop": noop,
        }
        for name in others:
            fns[f"inspect_{name}"] = lambda name=name: inspect_transcript(paths[name], settings)
            fns[f"parse_{name}"] = lambda name=name: parse_floor(others[name])
        times = interleaved(fns, repeat)
    inspect_s, parse_s, normalise_s = times["inspect"], times["parse"], times["normalise"]
    live_s, noop_s, decode_s = times["live"], times["noop"], times["decode"]
    n = len(events)
    out: dict[str, object] = {
        "events": n,
        "lines": len(lines),
        "findings": len(report.findings),
        "runs": repeat,
        "inspect_s": round(inspect_s, 4),
        "inspect_events_per_s": round(n / inspect_s),
        "parse_floor_s": round(parse_s, 4),
        "read_parse_floor_s": round(times["read_parse"], 4),
        "decode_floor_s": round(decode_s, 4),
        "normalise_baseline_s": round(normalise_s, 4),
        "inspect_vs_parse_floor": round(inspect_s / parse_s, 2),
        "inspect_vs_read_parse_floor": round(inspect_s / times["read_parse"], 2),
        "inspect_vs_decode_floor": round(inspect_s / decode_s, 2),
        "inspect_vs_normalise": round(inspect_s / normalise_s, 2),
        "goal_events_per_s": 200_000,
        "goal_vs_parse_floor": 2.5,
        "meets_goal": n / inspect_s >= 200_000 and inspect_s / parse_s <= 2.5,
        "per_event_us": round(live_s / n * 1e6, 3),
        "noop_per_event_us": round(noop_s / n * 1e6, 3),
        "per_event_vs_noop": round(live_s / noop_s, 2),
    }
    for name, count in counts.items():
        seconds, floor = times[f"inspect_{name}"], times[f"parse_{name}"]
        out[name] = {
            "events": count,
            "inspect_s": round(seconds, 4),
            "inspect_events_per_s": round(count / seconds),
            "parse_floor_s": round(floor, 4),
            "inspect_vs_parse_floor": round(seconds / floor, 2),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
