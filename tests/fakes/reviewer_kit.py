"""Helpers for the review tests: settings, finished tasks, knowledge docs, reviewer answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from worker.config import Settings, load_settings
from worker.models import IterationRecord, Outcome, Task, TaskResult
from worker.state.store import Store

ALL_OFF = {
    "style": {"enabled": False},
    "design": {"enabled": False},
    "knowledge": {"enabled": False},
}


def review_settings(ws: Path, review: dict[str, Any] | None = None, **overrides: Any) -> Settings:
    """Settings of workspace `ws` with a `[review]` section (reviewers all off unless given)."""
    ws.mkdir(parents=True, exist_ok=True)
    section: dict[str, Any] = {key: dict(value) for key, value in ALL_OFF.items()}
    for key, value in (review or {}).items():
        if key in section and isinstance(value, dict):
            section[key] = {"enabled": True, **value}
        else:
            section[key] = value
    # The stand-in reviewer keeps its call log outside the tree, which the agent's sandbox
    # refuses: these tests are about the reviewers (tests/test_sandbox*.py about the box).
    overrides.setdefault("sandbox", {"mode": "off", "untrusted_mode": "off"})
    return load_settings(ws, env={}, review=section, **overrides)


def open_store(settings: Settings) -> Store:
    return Store(settings.db_path)


def iteration(status: str = "success", reason_code: str | None = None) -> IterationRecord:
    return IterationRecord(
        mode="code-simple",
        model="haiku",
        iteration=1,
        status=status,
        reason="",
        reason_code=reason_code,
        duration_s=1.0,
        cost_usd=0.01,
        input_tokens=10,
        output_tokens=5,
        exit_code=0,
    )


def finished(
    task_id: str,
    outcome: Outcome = Outcome.SUCCESS,
    *,
    title: str | None = None,
    final_text: str = "",
    iterations: list[IterationRecord] | None = None,
    modes: list[str] | None = None,
) -> TaskResult:
    task = Task(task_id, "inbox", title or f"task {task_id}", body="Please do the thing.")
    return TaskResult(
        task,
        outcome,
        reason="done",
        modes=modes or ["code-simple"],
        iterations=iterations if iterations is not None else [iteration()],
        final_text=final_text,
        cost_usd=0.05,
    )


def style_answer(
    *descriptions: str,
    docs: list[dict[str, Any]] | None = None,
    kind: str = "cleanup",
    converging: bool = False,
) -> str:
    return json.dumps(
        {
            "conventions_updated": [doc["path"] for doc in docs or []],
            "documents": docs or [],
            "directives": [
                {
                    "type": kind,
                    "description": text,
                    "rationale": "consistency",
                    "priority": "low" if kind == "cleanup" else "normal",
                    "files": ["worker/a.py"],
                }
                for text in descriptions
            ],
            "summary": f"{len(descriptions)} findings",
            "converging": converging,
        }
    )


def design_answer(*descriptions: str) -> str:
    return json.dumps(
        {
            "design_updates": [],
            "directives": [
                {
                    "type": "functional",
                    "description": text,
                    "rationale": "the design changed",
                    "priority": "normal",
                }
                for text in descriptions
            ],
            "summary": "design reviewed",
        }
    )


def knowledge_answer(*contents: str) -> str:
    return json.dumps(
        {
            "knowledge_items": [
                {
                    "category": "lesson",
                    "content": text,
                    "source_task": "t1",
                    "confidence": "high",
                    "needs_user_review": False,
                }
                for text in contents
            ],
            "summary": "captured",
        }
    )


def convention_doc(
    name: str = "errors", rules: tuple[str, ...] = ("Raise WorkerError",)
) -> dict[str, Any]:
    return {
        "path": f"conventions/{name}.md",
        "title": f"{name.title()} conventions",
        "rules": list(rules),
        "examples": "Good: raise WorkerError('x')",
        "rationale": "one error type",
    }


def write_user_doc(settings: Settings, rel: str, text: str) -> Path:
    path = settings.workspace / "docs" / "knowledge" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
