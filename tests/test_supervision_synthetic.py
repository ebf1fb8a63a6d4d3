"""Claude Code's own `<synthetic>` assistant messages are the CLI's words, not the model's.

When a usage limit is hit, the CLI writes "You've hit your limit · resets 7pm" as an assistant
message of model `<synthetic>`, then an error result. A session that comes back after the
limit and meets it again is a CLI error seen in several sessions (`cli_error`), not the model
repeating itself (`repeated_message`).
"""

from __future__ import annotations

import json
from pathlib import Path

from worker.agents.claude_stream import SYNTHETIC_MODEL, normalise_line
from worker.models import EventKind
from worker.supervision.formats import read_text
from worker.supervision.postmortem import replay
from worker.supervision.settings import SupervisionSettings

# Recorded by hive-mind (issue 1152): init, the CLI's limit message, the error result.
LIMIT = (
    Path(__file__).parent / "fixtures/transcripts/corpus/hive-claude-issue-1152-usage-limit.jsonl"
)
WORDS = "You've hit your limit · resets 7pm (Europe/Berlin)"


def test_the_cli_s_limit_message_is_marked_as_the_cli_s() -> None:
    """The recorded message's text event names the `<synthetic>` model; a model's text
    names none, as before."""
    texts = [
        event
        for line in LIMIT.read_text(encoding="utf-8").splitlines()
        for event in normalise_line(line)
        if event.kind is EventKind.TEXT
    ]
    assert [(event.text, event.model) for event in texts] == [(WORDS, SYNTHETIC_MODEL)]
    said = json.dumps(
        {"type": "assistant", "message": {"model": "claude-x", "content": "the same words"}}
    )
    assert [event.model for event in normalise_line(said)] == [None]


def test_a_session_back_after_the_limit_is_a_cli_error_not_a_repeated_message() -> None:
    """The recorded session, resumed twice into the same limit: the limit is a cli_error
    (warn at the second session, urgent at the third) and no repeated_message is found."""
    _, events = read_text(LIMIT.read_text(encoding="utf-8") * 3)
    report = replay(list(events), SupervisionSettings())
    assert [(f.kind, f.level, f.count) for f in report.findings] == [
        ("cli_error", "warn", 2),
        ("cli_error", "urgent", 3),
    ]
    assert report.findings[0].evidence == {"error": WORDS}


def test_the_model_saying_the_same_thing_three_times_is_still_a_repeated_message() -> None:
    """The same three messages from the model itself (the recorded lines with the model's
    name) are still the model repeating itself."""
    text = LIMIT.read_text(encoding="utf-8").replace(f'"model":"{SYNTHETIC_MODEL}"', '"model":"m"')
    _, events = read_text(text * 3)
    kinds = [f.kind for f in replay(list(events), SupervisionSettings()).findings]
    assert "repeated_message" in kinds and "cli_error" in kinds
