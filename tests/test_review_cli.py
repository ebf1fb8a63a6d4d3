"""`worker directives list|drop`, `worker knowledge list|reviewers`, and the `[review]` settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import run_worker
from tests.fakes.reviewer_kit import open_store, review_settings, write_user_doc
from worker.cli.app import app
from worker.config import load_settings
from worker.review import db
from worker.review import directives as queue


def _queue(ws: Path) -> list[int]:
    settings = review_settings(ws)
    with open_store(settings) as store:
        db.ensure(store)
        ids = [
            queue.add(
                store,
                type="cleanup",
                source="style",
                description="tidy imports",
                priority="low",
                seq=0,
                cleanup_cap=10,
            ),
            queue.add(
                store,
                type="functional",
                source="design",
                description="split the loop",
                rationale="it does two things",
                seq=0,
                cleanup_cap=10,
            ),
        ]
    return [i for i in ids if i is not None]


def test_directives_list_json_shows_pending_in_prompt_order(tmp_path: Path, cli: Any) -> None:
    ws = tmp_path / "ws"
    _queue(ws)
    result = cli.invoke(app, ["directives", "list", "--json", "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [d["description"] for d in data["directives"]] == ["split the loop", "tidy imports"]
    assert data["directives"][0]["id"] == "D2"


def test_directives_drop_then_list_all_shows_the_fate(tmp_path: Path, cli: Any) -> None:
    ws = tmp_path / "ws"
    cleanup, _ = _queue(ws)
    dropped = cli.invoke(app, ["directives", "drop", f"D{cleanup}", "--workspace", str(ws)])
    assert dropped.exit_code == 0 and dropped.stdout.strip() == f"dropped D{cleanup}"
    listed = cli.invoke(app, ["directives", "list", "--all", "--workspace", str(ws)])
    assert listed.exit_code == 0
    rows = [row.split("\t") for row in listed.stdout.splitlines()]
    line = next(row for row in rows if row[0] == f"D{cleanup}")
    assert "dropped" in line and line[-1].endswith("dropped by the user")


def test_dropping_an_unknown_directive_exits_2_with_a_message(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _queue(ws)
    proc = run_worker(ws, "directives", "drop", "D99")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "cannot drop D99: there is no such directive" in proc.stderr


def test_knowledge_list_and_reviewers(tmp_path: Path, cli: Any) -> None:
    ws = tmp_path / "ws"
    settings = review_settings(ws)
    write_user_doc(settings, "conventions/logging.md", "# Logging\n\n## Rules\n\n1. No print.\n")
    docs = cli.invoke(app, ["knowledge", "list", "--json", "--workspace", str(ws)])
    assert docs.exit_code == 0, docs.output
    assert json.loads(docs.stdout)["docs"][0] == {
        "path": "conventions/logging.md",
        "title": "Logging",
        "folder": "conventions",
        "status": "established",
        "writer": "user",
        "after_task": None,
        "rules": 1,
        "needs_review": 0,
    }
    reviewers = cli.invoke(app, ["knowledge", "reviewers", "--workspace", str(ws)])
    assert reviewers.exit_code == 0, reviewers.output
    assert "reviewers cost $0.0000 in all" in reviewers.stdout


def test_a_partial_reviewer_section_keeps_that_reviewers_defaults(tmp_path: Path) -> None:
    """`[review.design] model = "opus"` must not turn design into a count-triggered reviewer."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "worker.toml").write_text(
        '[review.design]\nmodel = "opus"\n[review.style]\ninterval = 7\n'
    )
    review = load_settings(ws, env={}).review
    assert (review.design.model, review.design.interval, review.design.on_milestone) == (
        "opus",
        0,
        True,
    )
    assert (review.style.interval, review.knowledge.interval) == (7, 3)
    assert (review.token_budget, review.directive_max_age, review.cleanup_cap) == (2000, 15, 10)
