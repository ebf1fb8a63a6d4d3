"""Issue 16, fifth round: `InspectReport.to_dict` is `dataclasses.asdict` without its deep copy.

`worker inspect --json` renders the report's dict; asdict built it through copy.deepcopy of
every value, more time than the rendering itself for a report of 1,000 findings. The dict
built field by field is held here to asdict's, on every recorded transcript.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from worker.supervision.formats import UnreadableTranscript
from worker.supervision.postmortem import inspect_transcript
from worker.supervision.settings import SupervisionSettings

from .test_supervision_kit import WRITTEN

FIXTURES = Path(__file__).parent / "fixtures"


def test_every_report_s_dict_is_asdict_s() -> None:
    """Equal, and equal once rendered as JSON (the keys in the same order), for the report of
    each recorded transcript, findings, evidence and stop included."""
    settings = SupervisionSettings(radio_check_events=1)
    checked = with_findings = with_stop = 0
    for path in sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".jsonl", ".json")):
        try:
            report = inspect_transcript(path, settings)
        except UnreadableTranscript:
            continue
        data = report.to_dict()
        assert data == asdict(report), path.name
        assert json.dumps(data) == json.dumps(asdict(report)), path.name
        checked += 1
        with_findings += bool(report.findings)
        with_stop += report.stop is not None
    assert checked > 50 and with_findings > 10 and with_stop > 0


def test_the_dict_is_a_copy() -> None:
    """Changing the dict (its evidence's lists included) leaves the report as it was."""
    report = inspect_transcript(WRITTEN / "claude-cascade.jsonl", SupervisionSettings())
    before = asdict(report)
    data = report.to_dict()
    finding = next(f for f in data["findings"] if isinstance(f["evidence"].get("tools"), list))
    finding["evidence"]["tools"].append("changed")
    finding["kind"] = "changed"
    data["findings"].clear()
    assert asdict(report) == before
