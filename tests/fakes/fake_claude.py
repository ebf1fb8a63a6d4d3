#!/usr/bin/env python3
"""A fake `claude` that prints real stream-json, driven by a script of answers.

FAKE_CLAUDE_SCRIPT: a JSON file `{"answers": [answer, ...]}`; invocation n uses answer n (the
last one repeats). FAKE_CLAUDE_LOG: a JSONL file where each invocation appends
`{"argv": [...], "stdin": "...", "cwd": "..."}`. An answer may hold:
  text       the final text (a STATUS block is added from `status`/`reason` when given)
  status, reason, escalate_to, wait_for, resume_when
  tools      [{"name", "input", "error"}] tool calls and their results before the text
  cost       total_cost_usd (default 0.01)
  exit       exit code (default 0)
  garbage    print lines that are not JSON instead of a stream
  hang       sleep this many seconds before answering (after spawning `child` if true)
  child      spawn a child process that sleeps as long (to prove the group is killed)
  rate_limit_rejected   epoch seconds of the reset: a rejected rate_limit_event, exit 1
  usage_limit_text      print "You've hit your limit" as a plain line and exit 1
  session_missing       when called with --resume, fail like the CLI does for a lost session
  is_error   the result says is_error true (API error with subtype success)
  usage      input token count of the turn (context size)
  crash      print this text on stderr and exit (`exit`, default 1) before any stream, as the
             CLI does for a bad flag or a missing login
  hang_after_text   print the assistant text, then sleep this many seconds (killed mid-answer)
  files      [{"path", "text", "mode"}] files the agent writes (its Write tool), relative to
             its working folder; `mode` in octal (e.g. "755")
  big_line   print one assistant event this many bytes long, in pieces (a runaway output);
             `big_lines` such events (default 1)
  gate       a folder: before its k-th step after the first (each tool call, then the text,
             then the result) the agent waits until the file `go-<k>` exists there, so a
             test decides when each event comes
  replay     print the lines of this recorded stream-json file, then sleep `hang` seconds (if
             given) and exit with `exit`: a real CLI's stream, e.g. its API retries
"""

import json
import os
import subprocess
import sys
import time
import uuid


def wait_gate(gate: str | None, step: int) -> None:
    """Wait until the test opens this step's gate (none before the first step)."""
    if not gate or step == 0:
        return
    while not os.path.exists(os.path.join(gate, f"go-{step}")):
        time.sleep(0.02)


def main() -> int:
    stdin = sys.stdin.read()
    with open(os.environ["FAKE_CLAUDE_SCRIPT"], encoding="utf-8") as handle:
        script = json.load(handle)
    log_path = os.environ.get("FAKE_CLAUDE_LOG")
    calls = 0
    if log_path and os.path.exists(log_path):
        with open(log_path, encoding="utf-8") as handle:
            calls = sum(1 for _ in handle)
    if log_path:
        with open(log_path, "a", encoding="utf-8") as handle:
            entry = {
                "argv": sys.argv[1:],
                "stdin": stdin,
                "cwd": os.getcwd(),
                "pid": os.getpid(),
                "tokens": sorted(k for k in os.environ if "GITHUB_TOKEN" in k or k == "GH_TOKEN"),
            }
            handle.write(json.dumps(entry) + "\n")
    answers = script["answers"]
    answer = answers[min(calls, len(answers) - 1)]
    argv = sys.argv[1:]
    resume = argv[argv.index("--resume") + 1] if "--resume" in argv else None
    model = argv[argv.index("--model") + 1] if "--model" in argv else "claude-sonnet-4-5"

    if "replay" in answer:
        with open(answer["replay"], encoding="utf-8") as handle:
            for line in handle:
                print(line.rstrip("\n"), flush=True)
        time.sleep(float(answer.get("hang", 0)))
        return int(answer.get("exit", 0))

    if answer.get("session_missing") and resume:
        print(f"No conversation found with session ID: {resume}", file=sys.stderr)
        return 1
    if answer.get("crash"):
        print(answer["crash"], file=sys.stderr)
        return int(answer.get("exit", 1))
    if answer.get("child"):
        child = subprocess.Popen(
            [sys.executable, "-c", f"import time; time.sleep({answer['hang']})"]
        )
        if log_path:
            with open(log_path + ".children", "a", encoding="utf-8") as handle:
                handle.write(f"{child.pid}\n")
    if answer.get("hang"):
        time.sleep(float(answer["hang"]))
    if answer.get("garbage"):
        print("this is not json at all")
        print("{broken json")
        return int(answer.get("exit", 0))
    if answer.get("usage_limit_text"):
        print("You've hit your limit · resets 1pm (Europe/Paris)")
        return 1

    session = resume or str(uuid.uuid4())
    emit(
        {
            "type": "system",
            "subtype": "init",
            "cwd": os.getcwd(),
            "session_id": session,
            "tools": ["Bash", "Read", "Edit"],
            "model": model,
            "permissionMode": "default",
            "apiKeySource": "none",
            "claude_code_version": "2.0.28",
            "uuid": str(uuid.uuid4()),
        }
    )
    for item in answer.get("files", []):
        write_file(item)
    for _ in range(int(answer.get("big_lines", 1)) if answer.get("big_line") else 0):
        big_line(int(answer["big_line"]), session)
    steps = iter(range(len(answer.get("tools", [])) + 3))
    gate = answer.get("gate")
    for tool in answer.get("tools", []):
        wait_gate(gate, next(steps))
        tool_id = "toolu_" + uuid.uuid4().hex[:20]
        assistant(
            [
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": tool["name"],
                    "input": tool.get("input", {}),
                }
            ],
            session,
            answer,
        )
        result = {
            "type": "tool_result",
            "tool_use_id": tool_id,
            "content": tool.get("error") or tool.get("output", "ok"),
        }
        if tool.get("error"):
            result["is_error"] = True
        emit(
            {
                "type": "user",
                "message": {"role": "user", "content": [result]},
                "session_id": session,
                "uuid": str(uuid.uuid4()),
            }
        )
    text = answer.get("text", "")
    if "status" in answer:
        block = [
            "=== AGENT STATUS ===",
            f"STATUS: {answer['status']}",
            f"REASON: {answer.get('reason', '')}",
        ]
        for key, field in (
            ("escalate_to", "ESCALATE_TO"),
            ("wait_for", "WAIT_FOR"),
            ("resume_when", "RESUME_WHEN"),
        ):
            if key in answer:
                block.append(f"{field}: {answer[key]}")
        block.append("===================")
        text = (text + "\n\n" if text else "") + "\n".join(block)
    wait_gate(gate, next(steps))
    assistant([{"type": "text", "text": text}], session, answer)
    wait_gate(gate, next(steps))
    if answer.get("hang_after_text"):
        time.sleep(float(answer["hang_after_text"]))
    if "rate_limit_rejected" in answer:
        emit(
            {
                "type": "rate_limit_event",
                "rate_limit_info": {
                    "status": "rejected",
                    "resetsAt": answer["rate_limit_rejected"],
                    "rateLimitType": "five_hour",
                },
                "session_id": session,
            }
        )
        emit(
            {
                "type": "result",
                "subtype": "success",
                "is_error": True,
                "duration_ms": 5,
                "num_turns": 1,
                "result": "Claude AI usage limit reached",
                "session_id": session,
                "total_cost_usd": 0.0,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
        )
        return 1
    emit(
        {
            "type": "result",
            "subtype": "success",
            "is_error": bool(answer.get("is_error")),
            "duration_ms": 12,
            "duration_api_ms": 10,
            "num_turns": 1 + len(answer.get("tools", [])),
            "result": text,
            "session_id": session,
            "total_cost_usd": answer.get("cost", 0.01),
            "usage": {"input_tokens": 3, "output_tokens": 5},
            "permission_denials": [],
            "uuid": str(uuid.uuid4()),
        }
    )
    return int(answer.get("exit", 0))


def assistant(content, session, answer):
    emit(
        {
            "type": "assistant",
            "message": {
                "model": "claude-sonnet-4-5-20250929",
                "id": "msg_" + uuid.uuid4().hex[:20],
                "type": "message",
                "role": "assistant",
                "content": content,
                "stop_reason": None,
                "usage": {
                    "input_tokens": 3,
                    "cache_creation_input_tokens": answer.get("usage", 1000),
                    "cache_read_input_tokens": 0,
                    "output_tokens": 5,
                },
            },
            "parent_tool_use_id": None,
            "session_id": session,
            "uuid": str(uuid.uuid4()),
        }
    )


def write_file(item):
    path = os.path.join(os.getcwd(), item["path"])
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(item["text"])
    if "mode" in item:
        os.chmod(path, int(item["mode"], 8))


def big_line(size, session):
    head = '{"type": "assistant", "session_id": "%s", "message": {"content": [{"type": "text", '
    head = (head % session) + '"text": "'
    sys.stdout.write(head)
    piece = "x" * (1 << 20)
    left = size - len(head) - 4
    while left > 0:
        sys.stdout.write(piece[: min(left, len(piece))])
        left -= len(piece)
    sys.stdout.write('"}]}}\n')
    sys.stdout.flush()


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
